// control_proto.cpp - the control protocol's framing (docs/control.md):
// request lines read from a byte stream, replies built on the wire format
// (data lines escaped, one status line), errno names. No verbs and no
// engine: control_verbs.cpp parses and answers requests, control_metrics.cpp
// renders the counters. Replies are built whole in memory rather than
// streamed: a dump is small next to the socket buffers, and a reply built
// first can never be cut by an engine error half-way.
#include "control_proto.h"

#include <cerrno>
#include <cstdio>

namespace cmwq::control {

void append_escaped(std::string &out, std::string_view s)
{
	static const char hex[] = "0123456789abcdef";
	for (char ch : s) {
		auto c = static_cast<unsigned char>(ch);
		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			out += "\\x";
			out += hex[c >> 4];
			out += hex[c & 15];
		} else {
			out += ch;
		}
	}
}

// ---- line_reader -------------------------------------------------------------

line_reader::status line_reader::next(std::string &line)
{
	std::size_t nl = buf_.find('\n', scanned_);
	if (nl == std::string::npos) {
		scanned_ = buf_.size();
		// One byte of slack for the '\r' of a "\r\n" ending.
		return buf_.size() > max_request + 1 ? status::too_long : status::need_more;
	}
	std::size_t len = nl;
	if (len > 0 && buf_[len - 1] == '\r')
		len--;
	if (len > max_request)
		return status::too_long;
	line.assign(buf_, 0, len);
	buf_.erase(0, nl + 1);
	scanned_ = 0;
	return status::line;
}

std::string line_reader::take_partial()
{
	std::string p = std::move(buf_);
	buf_.clear();
	scanned_ = 0;
	if (!p.empty() && p.back() == '\r')
		p.pop_back();
	return p;
}

// ---- reply_builder ---------------------------------------------------------------

void reply_builder::data(std::string_view text)
{
	do {
		std::size_t nl = text.find('\n');
		std::string_view piece = text.substr(0, nl);
		out_ += ' ';
		append_escaped(out_, piece);
		out_ += '\n';
		if (nl == std::string_view::npos)
			break;
		text.remove_prefix(nl + 1);
	} while (!text.empty());
}

void reply_builder::line(std::string_view text)
{
	out_ += ' ';
	append_escaped(out_, text);
	out_ += '\n';
}

reply reply_builder::ok(std::string_view text)
{
	out_ += "ok";
	if (!text.empty()) {
		out_ += ' ';
		append_escaped(out_, text);
	}
	out_ += '\n';
	return reply{std::move(out_), false};
}

reply reply_builder::error(int err, std::string_view message)
{
	out_ += "error ";
	out_ += errno_name(err);
	out_ += ' ';
	append_escaped(out_, message);
	out_ += '\n';
	return reply{std::move(out_), false};
}

reply too_long_reply()
{
	reply r = reply_builder().error(E2BIG, "request too long");
	r.close = true;
	return r;
}

const char *errno_name(int err) noexcept
{
	if (err < 0)
		err = -err;
	switch (err) {
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ESRCH: return "ESRCH";
	case EINTR: return "EINTR";
	case EIO: return "EIO";
	case E2BIG: return "E2BIG";
	case EBADF: return "EBADF";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EFAULT: return "EFAULT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENODEV: return "ENODEV";
	case ENOTDIR: return "ENOTDIR";
	case EINVAL: return "EINVAL";
	case ENOSPC: return "ENOSPC";
	case ERANGE: return "ERANGE";
	case EDEADLK: return "EDEADLK";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	case ENOSYS: return "ENOSYS";
	case ELOOP: return "ELOOP";
	case EOVERFLOW: return "EOVERFLOW";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EADDRINUSE: return "EADDRINUSE";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECONNREFUSED: return "ECONNREFUSED";
	case EALREADY: return "EALREADY";
	case EINPROGRESS: return "EINPROGRESS";
	case ECANCELED: return "ECANCELED";
	default: break;
	}
	// Other numbers as "E<n>", in a per-thread buffer.
	thread_local char buf[24];
	std::snprintf(buf, sizeof(buf), "E%d", err);
	return buf;
}

} // namespace cmwq::control
