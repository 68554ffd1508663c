// control_proto.h - the control endpoint's request language, without sockets.
//
// Splitting a byte stream into request lines, parsing a request and building
// its reply are pure functions over a `backend` (the engine, or a fake in
// tests and the fuzzer), so every input the socket can deliver is testable
// without one. The wire format is described in docs/control.md.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <cmwq/introspect.hpp>

namespace cmwq::control {

// The longest request line accepted, not counting "\n" (or "\r\n").
inline constexpr std::size_t max_request = 4096;

// Splits what a client sends into request lines. Holds at most one
// incomplete line plus one read's worth of bytes when the caller reads only
// after next() returned need_more.
class line_reader {
public:
	enum class status { need_more, line, too_long };

	void feed(const char *p, std::size_t n) { buf_.append(p, n); }
	// Extracts the next complete line (without "\n" and a trailing "\r").
	// too_long: the line being received is over max_request; the stream
	// cannot be resynchronised and the caller should close it.
	status next(std::string &line);
	// Bytes received after the last complete line (a request cut by EOF).
	bool has_partial() const noexcept { return !buf_.empty(); }
	std::string take_partial();

private:
	std::string buf_;
	std::size_t scanned_ = 0; // bytes of buf_ known to hold no '\n'
};

// What the dispatcher needs from the library; the engine implements it in
// control.cpp with the public C API of <cmwq/stats.h> and <cmwq/params.h>.
// Return values follow those functions (0 or a negative errno).
class backend {
public:
	virtual ~backend() = default;
	virtual int sysfs_get(const char *wq, const char *attr, char *buf, std::size_t len) = 0;
	virtual int sysfs_set(const char *wq, const char *attr, const char *value) = 0;
	virtual std::vector<std::string> sysfs_list() = 0;
	virtual int param_get(const char *name, char *buf, std::size_t len) = 0;
	virtual int param_set(const char *name, const char *value) = 0;
	virtual const char *param_name(unsigned index) = 0;
	// The values a parameter accepts, in words ("0, 1"), or nullptr.
	virtual const char *param_accepted(const char *name) = 0;
	virtual std::string dump() = 0;
	virtual system_info snapshot() = 0;
};

// A parsed request: the verb and its whitespace-separated arguments. For
// "set" and "param" the last argument is the rest of the line, trimmed, so a
// value may contain spaces.
struct request {
	std::string verb;
	std::vector<std::string> args;
};

// Parses one request line. Returns an empty string and fills `out`, or the
// text of an error reply's message (errno EINVAL).
std::string parse_request(std::string_view line, request &out);

// The bytes to send back for one request, and whether to close afterwards.
struct reply {
	std::string text;
	bool close = false;
};

// Builds a reply on the wire format: zero or more data lines, each sent as a
// space followed by the text (control characters escaped as \xHH), then one
// status line "ok", "ok <text>" or "error <ERRNO> <message>".
class reply_builder {
public:
	// Adds `text` as data; a text with newlines becomes several data lines
	// (a final newline does not add an empty one).
	void data(std::string_view text);
	// Adds exactly one data line; newlines in `text` are escaped too.
	void line(std::string_view text);
	reply ok(std::string_view text = {});
	reply error(int err, std::string_view message);

private:
	std::string out_;
};

// Handles one request line (as line_reader returns it). Never throws.
reply handle_request(std::string_view line, backend &be);

// The reply to a request line over max_request bytes.
reply too_long_reply();

// Appends s to out with control characters other than tab escaped as \xHH:
// how a data line carries any text (also the "stats" lines' names).
void append_escaped(std::string &out, std::string_view s);

// "EINVAL" for EINVAL (positive or negative); "E<n>" for numbers without a
// name here, valid until the calling thread's next call.
const char *errno_name(int err) noexcept;

// OpenMetrics text (ending with "# EOF") of every counter in `si`.
std::string render_metrics(const system_info &si);
// One line per workqueue, "key=value ... name=<name>" (docs/control.md).
std::string render_stats(const system_info &si);

} // namespace cmwq::control
