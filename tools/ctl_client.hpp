// ctl_client.hpp - the client side of the control endpoint, shared by wqctl
// and wq_monitor (header-only: each tools/*.cpp is one program).
//
// Finds a process's socket from its pid the way the library names it
// ($XDG_RUNTIME_DIR/cmwq/<pid>.sock, else /tmp/cmwq-<euid>/<pid>.sock; root
// also looks in every user's directories), sends one request line and reads
// the reply: data lines start with a space, the first other line is the
// status (docs/control.md).
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

namespace ctl_client {

struct reply {
	std::vector<std::string> data;
	std::string status; // "ok", "ok <text>" or "error <ERRNO> <message>"
	bool ok() const { return status == "ok" || status.rfind("ok ", 0) == 0; }
	// "EINVAL nice: accepted values ..." for an error status.
	std::string error_text() const
	{
		return status.rfind("error ", 0) == 0 ? status.substr(6) : status;
	}
};

inline std::vector<std::string> list_dir(const std::string &dir)
{
	std::vector<std::string> names;
	if (DIR *d = ::opendir(dir.c_str())) {
		while (dirent *e = ::readdir(d))
			if (e->d_name[0] != '.')
				names.emplace_back(e->d_name);
		::closedir(d);
	}
	return names;
}

// The directories a socket of ours may be in, most specific first.
inline std::vector<std::string> socket_dirs()
{
	std::vector<std::string> dirs;
	auto add = [&](const std::string &d) {
		for (const auto &x : dirs)
			if (x == d)
				return;
		dirs.push_back(d);
	};
	if (const char *x = std::getenv("XDG_RUNTIME_DIR"); x && x[0] == '/')
		add(std::string(x) + "/cmwq");
	add("/tmp/cmwq-" + std::to_string(static_cast<unsigned long>(::geteuid())));
	if (::geteuid() == 0) {
		// Root may talk to every user's processes (the server allows it).
		for (const auto &u : list_dir("/run/user"))
			add("/run/user/" + u + "/cmwq");
		for (const auto &n : list_dir("/tmp"))
			if (n.rfind("cmwq-", 0) == 0)
				add("/tmp/" + n);
	}
	return dirs;
}

inline bool is_number(const std::string &s);

// Calls fn(pid, socket path) for every "<pid>.sock" in the socket
// directories (reachable or not: the caller connects).
template <class F>
void for_each_socket(F &&fn)
{
	for (const auto &dir : socket_dirs()) {
		for (const auto &name : list_dir(dir)) {
			if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".sock") != 0)
				continue;
			std::string pid = name.substr(0, name.size() - 5);
			if (is_number(pid))
				fn(pid, dir + "/" + name);
		}
	}
}

inline bool is_number(const std::string &s)
{
	if (s.empty() || s.size() > 10)
		return false;
	for (char c : s)
		if (c < '0' || c > '9')
			return false;
	return true;
}

// A pid's socket path, or "" if none of the directories has one. An
// argument with a '/' is taken as the socket path itself.
inline std::string find_socket(const std::string &target)
{
	if (target.find('/') != std::string::npos)
		return target;
	if (!is_number(target))
		return "";
	for (const auto &d : socket_dirs()) {
		std::string p = d + "/" + target + ".sock";
		struct stat st{};
		if (::lstat(p.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
			return p;
	}
	return "";
}

// A connected socket or -1 with errno set. Never blocks on a full backlog.
inline int connect_socket(const std::string &path)
{
	sockaddr_un a{};
	if (path.size() >= sizeof(a.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	a.sun_family = AF_UNIX;
	std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
	if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
		int e = errno;
		::close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

inline std::string read_comm(const std::string &pid)
{
	std::string comm;
	if (FILE *f = std::fopen(("/proc/" + pid + "/comm").c_str(), "r")) {
		char buf[64] = "";
		if (std::fgets(buf, sizeof(buf), f))
			comm = buf;
		std::fclose(f);
	}
	while (!comm.empty() && comm.back() == '\n')
		comm.pop_back();
	return comm.empty() ? "?" : comm;
}

inline long long now_ms()
{
	timespec ts{};
	::clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

class connection {
public:
	connection() = default;
	~connection() { close(); }
	connection(const connection &) = delete;
	connection &operator=(const connection &) = delete;

	// false with `err` describing why.
	bool open(const std::string &path, std::string &err)
	{
		close();
		fd_ = connect_socket(path);
		if (fd_ < 0) {
			err = path + ": " + std::strerror(errno);
			return false;
		}
		return true;
	}
	void close()
	{
		if (fd_ >= 0)
			::close(fd_);
		fd_ = -1;
		buf_.clear();
	}

	// Sends one request and reads its reply within timeout_ms. false with
	// `err` on a broken connection or a timeout; a reply with an error
	// status is still true.
	bool request(const std::string &line, reply &out, int timeout_ms, std::string &err)
	{
		out = reply{};
		long long deadline = now_ms() + timeout_ms;
		std::string req = line + "\n";
		std::size_t off = 0;
		while (off < req.size()) {
			ssize_t n = ::send(fd_, req.data() + off, req.size() - off, MSG_NOSIGNAL);
			if (n > 0) {
				off += static_cast<std::size_t>(n);
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				if (!wait(POLLOUT, deadline, err))
					return false;
				continue;
			}
			err = std::string("send: ") + std::strerror(errno);
			return false;
		}
		std::string l;
		for (;;) {
			if (!read_line(l, deadline, err))
				return false;
			if (!l.empty() && l[0] == ' ') {
				out.data.push_back(l.substr(1));
				continue;
			}
			out.status = l;
			return true;
		}
	}

private:
	bool wait(short events, long long deadline, std::string &err)
	{
		for (;;) {
			long long left = deadline - now_ms();
			if (left <= 0) {
				err = "timed out waiting for the reply";
				return false;
			}
			pollfd p{fd_, events, 0};
			int n = ::poll(&p, 1, static_cast<int>(left > 60000 ? 60000 : left));
			if (n > 0)
				return true;
			if (n < 0 && errno != EINTR) {
				err = std::string("poll: ") + std::strerror(errno);
				return false;
			}
		}
	}
	bool read_line(std::string &line, long long deadline, std::string &err)
	{
		for (;;) {
			auto nl = buf_.find('\n');
			if (nl != std::string::npos) {
				line.assign(buf_, 0, nl);
				buf_.erase(0, nl + 1);
				return true;
			}
			char b[65536];
			ssize_t n = ::recv(fd_, b, sizeof(b), 0);
			if (n > 0) {
				buf_.append(b, static_cast<std::size_t>(n));
				continue;
			}
			if (n == 0) {
				err = "connection closed by the process";
				return false;
			}
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (!wait(POLLIN, deadline, err))
					return false;
				continue;
			}
			err = std::string("recv: ") + std::strerror(errno);
			return false;
		}
	}

	int fd_ = -1;
	std::string buf_;
};

} // namespace ctl_client
