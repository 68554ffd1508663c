// control_verbs.cpp - the control protocol's requests (docs/control.md):
// the verb table, parsing a request line against it, and each verb's
// handler over the backend. The dispatcher turns the engine's bare return
// codes into messages that name the attribute and the values it accepts;
// the engine stays terse and the wording lives here, in one place.
#include "control_proto.h"
#include "admin/sysfs_attrs.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>

namespace cmwq::control {

namespace {

constexpr std::size_t max_value_size = 1u << 20; // attribute or parameter text
constexpr std::size_t max_quoted = 80;            // echoed user text in messages

bool is_space(char c) noexcept { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) noexcept
{
	while (!s.empty() && is_space(s.front()))
		s.remove_prefix(1);
	while (!s.empty() && is_space(s.back()))
		s.remove_suffix(1);
	return s;
}

// Removes and returns the first whitespace-separated token of `rest`.
std::string_view next_token(std::string_view &rest) noexcept
{
	std::size_t i = 0;
	while (i < rest.size() && is_space(rest[i]))
		i++;
	std::size_t j = i;
	while (j < rest.size() && !is_space(rest[j]))
		j++;
	std::string_view tok = rest.substr(i, j - i);
	rest.remove_prefix(j);
	return tok;
}

// User text echoed in a message: quoted and cut to a readable length.
std::string quote(std::string_view s)
{
	std::string q = "'";
	if (s.size() > max_quoted) {
		q.append(s.substr(0, max_quoted));
		q += "...";
	} else {
		q.append(s);
	}
	q += "'";
	return q;
}

using args_t = std::vector<std::string>;
// The handlers of the verbs below (defined with the replies); each gets the
// arguments parse_request checked against the verb's arity.
reply run_ls(backend &be, const args_t &a);
reply run_get(backend &be, const args_t &a);
reply run_set(backend &be, const args_t &a);
reply run_param(backend &be, const args_t &a);
reply run_params(backend &be, const args_t &a);
reply run_dump(backend &be, const args_t &a);
reply run_metrics(backend &be, const args_t &a);
reply run_stats(backend &be, const args_t &a);
reply run_help(backend &be, const args_t &a);
reply run_quit(backend &be, const args_t &a);

struct verb_info {
	const char *name;
	unsigned min_args, max_args;
	bool value_last; // the last argument is the rest of the line
	const char *usage;
	const char *help;
	reply (*run)(backend &be, const args_t &args);
};

constexpr verb_info verbs[] = {
	{"ls", 0, 0, false, "ls", "list the WQ_SYSFS workqueues", run_ls},
	{"get", 2, 2, false, "get <workqueue|-> <attribute>",
	 "read an attribute; '-' names the global ones", run_get},
	{"set", 3, 3, true, "set <workqueue|-> <attribute> <value>", "write an attribute", run_set},
	{"param", 1, 2, true, "param <name> [<value>]", "read or write a parameter", run_param},
	{"params", 0, 0, false, "params", "list the parameters as name=value", run_params},
	{"dump", 0, 0, false, "dump", "busy workqueues and worker pools", run_dump},
	{"metrics", 0, 0, false, "metrics", "every counter as OpenMetrics text", run_metrics},
	{"stats", 0, 0, false, "stats", "per-workqueue counters, one line each", run_stats},
	{"help", 0, 0, false, "help", "this list", run_help},
	{"quit", 0, 0, false, "quit", "close the connection", run_quit},
};

const verb_info *find_verb(std::string_view v) noexcept
{
	for (const auto &vi : verbs)
		if (v == vi.name)
			return &vi;
	return nullptr;
}

std::string verb_list()
{
	std::string s;
	for (const auto &vi : verbs) {
		if (!s.empty())
			s += ", ";
		s += vi.name;
	}
	return s;
}

// ---- attribute and parameter wording ---------------------------------------

// strerror_r comes in a GNU flavour (returns the text) and an XSI one
// (returns 0 and fills buf); these overloads accept either.
[[maybe_unused]] const char *strerror_result(const char *s, const char *) { return s; }
[[maybe_unused]] const char *strerror_result(int rc, const char *buf)
{
	return rc == 0 ? buf : "unknown error";
}

std::string strerror_text(int err)
{
	char buf[128] = "";
	const char *s = strerror_result(strerror_r(err, buf, sizeof(buf)), buf);
	return s ? s : "unknown error";
}

// Reads an attribute or parameter whole, growing the buffer on -ERANGE.
template <class Get>
int read_value(Get &&get, std::string &out)
{
	std::vector<char> buf(4096);
	for (;;) {
		buf[0] = '\0';
		int rc = get(buf.data(), buf.size());
		if (rc == -ERANGE && buf.size() < max_value_size) {
			buf.assign(buf.size() * 4, '\0');
			continue;
		}
		if (rc < 0)
			return rc;
		buf.back() = '\0';
		out.assign(buf.data());
		while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
			out.pop_back();
		return 0;
	}
}

int get_attr(backend &be, const char *wq, const std::string &attr, std::string &out)
{
	return read_value([&](char *b, std::size_t n) { return be.sysfs_get(wq, attr.c_str(), b, n); },
			  out);
}

// ENOENT: say which part is missing and what exists.
std::string missing_attr_message(backend &be, const std::string &wq, const std::string &attr)
{
	if (wq == "-")
		return "no global attribute " + quote(attr) + "; global attributes are " +
		       cmwq::detail::sysfs_attr_names(cmwq::detail::ATTR_GLOBAL);
	auto names = be.sysfs_list();
	if (std::find(names.begin(), names.end(), wq) == names.end())
		return "no WQ_SYSFS workqueue " + quote(wq) + " (see 'ls')";
	std::string per_cpu;
	bool unbound = get_attr(be, wq.c_str(), "per_cpu", per_cpu) == 0 && per_cpu == "0";
	return wq + ": no attribute " + quote(attr) + "; attributes are " +
	       cmwq::detail::sysfs_attr_names(unbound ? cmwq::detail::ATTR_UNBOUND : cmwq::detail::ATTR_PERCPU);
}

std::string set_error_message(backend &be, int err, const std::string &wq, const std::string &attr,
			      const std::string &value)
{
	switch (err) {
	case ENOENT:
		return missing_attr_message(be, wq, attr);
	case EACCES:
		if (attr == "max_active")
			return wq + ": max_active is read-only for ordered and BH workqueues";
		return attr + " is read-only";
	case EPERM:
		return attr + ": this process does not allow changing it at run time";
	case EINVAL:
		if (const char *acc = cmwq::detail::sysfs_attr_accepted(attr))
			return attr + ": accepted values are " + acc + " (got " + quote(value) + ")";
		return attr + ": invalid value " + quote(value);
	default:
		return attr + ": " + strerror_text(err);
	}
}

std::string param_error_message(backend &be, int err, const std::string &name,
				const std::string *value)
{
	switch (err) {
	case ENOENT:
		return "no parameter " + quote(name) + " (see 'params')";
	case EPERM:
	case EACCES:
		return name + " is read-only at run time";
	case EINVAL:
		if (value) {
			if (const char *acc = be.param_accepted(name.c_str()))
				return name + ": accepted values are " + acc + " (got " +
				       quote(*value) + ")";
			return name + ": invalid value " + quote(*value);
		}
		return name + ": invalid parameter";
	default:
		return name + ": " + strerror_text(err);
	}
}

// ---- the requests ----------------------------------------------------------

reply run_ls(backend &be, const args_t &)
{
	reply_builder r;
	for (const auto &n : be.sysfs_list())
		r.line(n);
	return r.ok();
}

reply run_get(backend &be, const args_t &a)
{
	const std::string &wq = a[0], &attr = a[1];
	reply_builder r;
	std::string val;
	int rc = get_attr(be, wq == "-" ? nullptr : wq.c_str(), attr, val);
	if (rc == -ENOENT)
		return r.error(ENOENT, missing_attr_message(be, wq, attr));
	if (rc == -ERANGE)
		return r.error(ERANGE, attr + ": value longer than " +
					       std::to_string(max_value_size) + " bytes");
	if (rc < 0)
		return r.error(-rc, attr + ": " + strerror_text(-rc));
	r.data(val);
	return r.ok();
}

reply run_set(backend &be, const args_t &a)
{
	const std::string &wq = a[0], &attr = a[1], &value = a[2];
	reply_builder r;
	int rc = be.sysfs_set(wq == "-" ? nullptr : wq.c_str(), attr.c_str(), value.c_str());
	if (rc < 0)
		return r.error(-rc, set_error_message(be, -rc, wq, attr, value));
	return r.ok();
}

// A name without a dot also finds the kernel's "workqueue.<name>".
std::string resolve_param(backend &be, const std::string &name)
{
	if (name.find('.') != std::string::npos)
		return name;
	std::string full = "workqueue." + name;
	for (unsigned i = 0; i < 100000; i++) {
		const char *n = be.param_name(i);
		if (!n)
			break;
		if (name == n)
			return name;
		if (full == n)
			return full;
	}
	return name;
}

reply run_param(backend &be, const args_t &a)
{
	const std::string &given = a[0];
	const std::string *value = a.size() > 1 ? &a[1] : nullptr;
	reply_builder r;
	std::string name = resolve_param(be, given);
	if (value) {
		int rc = be.param_set(name.c_str(), value->c_str());
		if (rc < 0)
			return r.error(-rc, param_error_message(be, -rc, name, value));
		return r.ok();
	}
	std::string val;
	int rc = read_value([&](char *b, std::size_t n) { return be.param_get(name.c_str(), b, n); },
			    val);
	if (rc < 0)
		return r.error(-rc, param_error_message(be, -rc, name, nullptr));
	r.data(val);
	return r.ok();
}

reply run_params(backend &be, const args_t &)
{
	reply_builder r;
	for (unsigned i = 0; i < 100000; i++) {
		const char *n = be.param_name(i);
		if (!n)
			break;
		std::string val;
		if (read_value([&](char *b, std::size_t len) { return be.param_get(n, b, len); },
			       val) == 0)
			r.line(std::string(n) + "=" + val);
	}
	return r.ok();
}

reply run_help(backend &, const args_t &)
{
	reply_builder r;
	for (const auto &vi : verbs) {
		std::string line = vi.usage;
		line.resize(std::max<std::size_t>(line.size() + 2, 40), ' ');
		r.data(line + vi.help);
	}
	return r.ok();
}

// The data of dump and stats may be empty (no busy or no workqueues).
reply text_reply(const std::string &text)
{
	reply_builder r;
	if (!text.empty())
		r.data(text);
	return r.ok();
}

reply run_dump(backend &be, const args_t &) { return text_reply(be.dump()); }
reply run_stats(backend &be, const args_t &) { return text_reply(render_stats(be.snapshot())); }

reply run_metrics(backend &be, const args_t &)
{
	reply_builder r;
	r.data(render_metrics(be.snapshot()));
	return r.ok();
}

reply run_quit(backend &, const args_t &)
{
	reply rep = reply_builder().ok("bye");
	rep.close = true;
	return rep;
}

reply dispatch(std::string_view line, backend &be)
{
	request req;
	std::string err = parse_request(line, req);
	if (!err.empty())
		return reply_builder().error(EINVAL, err);
	return find_verb(req.verb)->run(be, req.args); // parse_request knew the verb
}

} // namespace

// ---- parsing -------------------------------------------------------------------

std::string parse_request(std::string_view line, request &out)
{
	out.verb.clear();
	out.args.clear();
	if (line.size() > max_request)
		return "request too long";
	for (char ch : line) {
		auto c = static_cast<unsigned char>(ch);
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return "request contains control characters";
	}
	std::string_view rest = line;
	std::string_view verb = next_token(rest);
	if (verb.empty())
		return "empty request; requests are " + verb_list();
	const verb_info *vi = find_verb(verb);
	if (!vi)
		return "unknown request " + quote(verb) + "; requests are " + verb_list();
	out.verb.assign(verb);
	for (;;) {
		if (vi->value_last && out.args.size() + 1 == vi->max_args) {
			std::string_view value = trim(rest);
			if (!value.empty())
				out.args.emplace_back(value);
			break;
		}
		std::string_view tok = next_token(rest);
		if (tok.empty())
			break;
		if (out.args.size() == vi->max_args)
			return std::string("too many arguments; usage: ") + vi->usage;
		out.args.emplace_back(tok);
	}
	if (out.args.size() < vi->min_args)
		return std::string("missing arguments; usage: ") + vi->usage;
	return {};
}

reply handle_request(std::string_view line, backend &be)
{
	try {
		return dispatch(line, be);
	} catch (const std::bad_alloc &) {
		return reply_builder().error(ENOMEM, "out of memory");
	} catch (const std::exception &e) {
		return reply_builder().error(EIO, std::string("internal error: ") + e.what());
	} catch (...) {
		return reply_builder().error(EIO, "internal error");
	}
}

} // namespace cmwq::control
