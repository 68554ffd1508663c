// control.cpp - the opt-in control endpoint: a Unix-domain socket private to
// the user, served by one poll() thread (docs/control.md).
//
// One thread multiplexes every client and handles one request line at a time,
// rather than a thread per client: requests are short, the engine serialises
// attribute changes anyway, and a slow or hostile client can only hold its own
// connection. Access control is the directory (0700, ours) plus a
// SO_PEERCRED check on every connection, so a mistake in one still leaves the
// other.
#include "control_proto.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include "engine/engine.h"

#include <cmwq/control.h>
#include <cmwq/introspect.hpp>
#include <cmwq/params.h>
#include <cmwq/stats.h>

namespace cmwq::control {
namespace {

constexpr int max_clients = 64;
constexpr int listen_backlog = 16;
// How long stop() waits for the server thread to finish the request it is
// handling before giving up on it (it then exits on its own).
constexpr auto stop_wait = std::chrono::seconds(10);
// How long a stopping server keeps trying to deliver replies already built.
constexpr int flush_ms = 1000;

// ---- the engine behind the requests ----------------------------------------

class engine_backend final : public backend {
public:
	int sysfs_get(const char *wq, const char *attr, char *buf, std::size_t len) override
	{
		return cmwq_sysfs_get(wq, attr, buf, len);
	}
	int sysfs_set(const char *wq, const char *attr, const char *value) override
	{
		return cmwq_sysfs_set(wq, attr, value);
	}
	std::vector<std::string> sysfs_list() override
	{
		std::vector<std::string> names;
		// The callback runs under an engine lock: it only copies.
		cmwq_sysfs_list(
			[](const char *name, void *arg) {
				try {
					static_cast<std::vector<std::string> *>(arg)->emplace_back(name);
				} catch (...) {
				}
			},
			&names);
		return names;
	}
	int param_get(const char *name, char *buf, std::size_t len) override
	{
		return cmwq_param_get(name, buf, len);
	}
	int param_set(const char *name, const char *value) override
	{
		return cmwq_param_set(name, value);
	}
	const char *param_name(unsigned index) override { return cmwq_param_name(index); }
	const char *param_accepted(const char *name) override
	{
		return cmwq::detail::param_accepted(name);
	}
	std::string dump() override
	{
		char *text = nullptr;
		std::size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		if (!f)
			throw std::bad_alloc();
		cmwq_dump(f);
		std::fclose(f);
		std::string s(text ? text : "", len);
		std::free(text);
		return s;
	}
	system_info snapshot() override { return cmwq::snapshot(); }
};

// ---- one running server ---------------------------------------------------------

struct client {
	int fd = -1;
	line_reader in;
	std::string out;
	std::size_t out_off = 0;
	bool close_after = false; // after `out` is sent
	bool eof = false;         // the peer sent everything it will send
};

void close_fd(int &fd)
{
	if (fd >= 0)
		::close(fd);
	fd = -1;
}

// Shared by the thread and the start/stop callers, freed with the last
// reference. Only the thread uses listen_fd and the clients once started.
struct server {
	int listen_fd = -1;             // K: server thread (closed as it exits)
	int wake_rd = -1, wake_wr = -1; // I: closed by the destructor
	pid_t owner = 0;                // I: the process that created it
	pthread_t thread{};             // I: written under state_mu by start
	std::atomic<bool> stopping{false};
	std::atomic<bool> exited{false};
	std::mutex mu;
	std::condition_variable cv;
	bool done = false; // L: mu; the thread's last act on shared state

	server() = default;
	server(const server &) = delete;
	server &operator=(const server &) = delete;
	~server()
	{
		close_fd(listen_fd);
		close_fd(wake_rd);
		close_fd(wake_wr);
	}
};

// Start/stop state. L: state_mu.
std::mutex state_mu;
std::shared_ptr<server> current;     // L: state_mu
char path_buf[sizeof(sockaddr_un::sun_path)]; // L: state_mu for writes
std::atomic<bool> path_valid{false};
std::atomic<pid_t> current_owner{0}; // the process whose socket path_buf names
bool hooks_installed = false;        // L: state_mu

bool peer_allowed(int fd, uid_t &peer_uid)
{
	struct ucred cred{};
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred))
		return false;
	peer_uid = cred.uid;
	return cred.uid == geteuid() || cred.uid == 0;
}

// Best effort, non-blocking: for one-line replies to connections refused at
// once. What the client already sent is read first, so that the close is
// seen as an end of stream rather than a reset where possible.
void send_and_close(int fd, const std::string &text)
{
	(void)!::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
	char sink[4096];
	for (int i = 0; i < 16 && ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++) {
	}
	::close(fd);
}

// Sends what it can of c.out; false if the connection is broken.
bool flush_out(client &c)
{
	while (c.out_off < c.out.size()) {
		ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off,
				   MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			c.out_off += static_cast<std::size_t>(n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		return false;
	}
	c.out.clear();
	c.out_off = 0;
	return true;
}

// Handles buffered requests until a reply is waiting or input runs out.
// false: the connection is to be closed now.
bool serve(client &c, backend &be)
{
	for (;;) {
		if (!c.out.empty()) {
			if (!flush_out(c))
				return false;
			if (!c.out.empty())
				return true; // wait for POLLOUT
		}
		if (c.close_after)
			return false;
		std::string line;
		switch (c.in.next(line)) {
		case line_reader::status::line: {
			reply r = handle_request(line, be);
			c.out = std::move(r.text);
			c.close_after = r.close;
			continue;
		}
		case line_reader::status::too_long: {
			reply r = too_long_reply();
			c.out = std::move(r.text);
			c.close_after = true;
			continue;
		}
		case line_reader::status::need_more:
			if (!c.eof)
				return true;
			if (c.in.has_partial()) {
				// A last request without its newline.
				reply r = handle_request(c.in.take_partial(), be);
				c.out = std::move(r.text);
				c.close_after = true;
				continue;
			}
			return false;
		}
	}
}

// false when the process is out of file descriptors or memory: the pending
// connection stays queued and the caller stops polling for more a while
// (the listening socket would otherwise stay readable and spin the loop).
bool accept_clients(server &s, std::vector<client> &clients)
{
	for (;;) {
		int fd = ::accept4(s.listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK;
		}
		uid_t uid = static_cast<uid_t>(-1);
		if (!peer_allowed(fd, uid)) {
			send_and_close(fd, reply_builder()
						   .error(EACCES, "permission denied: peer uid " +
								  std::to_string(static_cast<long>(uid)) +
								  " is neither the owner nor root")
						   .text);
			continue;
		}
		if (clients.size() >= static_cast<std::size_t>(max_clients)) {
			send_and_close(fd, reply_builder().error(EBUSY, "too many clients").text);
			continue;
		}
		client c;
		c.fd = fd;
		clients.push_back(std::move(c));
	}
}

constexpr int accept_pause_ms = 200;

// Reads what is there; false on a broken connection.
bool read_client(client &c)
{
	char buf[4096];
	for (;;) {
		ssize_t n = ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0) {
			c.in.feed(buf, static_cast<std::size_t>(n));
			return true;
		}
		if (n == 0) {
			c.eof = true;
			return true;
		}
		if (errno == EINTR)
			continue;
		return errno == EAGAIN || errno == EWOULDBLOCK;
	}
}

// Gives replies already built a bounded chance to leave (a client that asked
// for "param cmwq.control 0" still gets its "ok").
void flush_before_exit(std::vector<client> &clients)
{
	auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(flush_ms);
	for (auto &c : clients) {
		while (!c.out.empty() && flush_out(c) && !c.out.empty()) {
			auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
				deadline - std::chrono::steady_clock::now());
			if (left.count() <= 0)
				break;
			pollfd p{c.fd, POLLOUT, 0};
			if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
				break;
		}
	}
}

void run_server(server &s)
{
	engine_backend be;
	std::vector<client> clients;
	std::vector<pollfd> pfds;
	bool accept_paused = false;
	while (!s.stopping.load(std::memory_order_acquire)) {
		pfds.clear();
		pfds.push_back({s.wake_rd, POLLIN, 0});
		// A negative fd is skipped by poll(): how accepting pauses.
		pfds.push_back({accept_paused ? -1 : s.listen_fd, POLLIN, 0});
		for (auto &c : clients)
			pfds.push_back({c.fd, static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
		int n = ::poll(pfds.data(), pfds.size(), accept_paused ? accept_pause_ms : -1);
		accept_paused = false;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			cmwq::detail::log_printf(LOG_WARNING, "cmwq: control: poll: %s; endpoint stopped\n",
				     std::strerror(errno));
			break;
		}
		if (pfds[0].revents) {
			char drain[64];
			while (::read(s.wake_rd, drain, sizeof(drain)) > 0) {
			}
			continue; // re-check stopping
		}
		// Clients first (indices match pfds[2...]), then new connections.
		std::vector<client> kept;
		kept.reserve(clients.size());
		for (std::size_t i = 0; i < clients.size(); i++) {
			client &c = clients[i];
			short re = pfds[i + 2].revents;
			bool alive = true;
			if (re & POLLNVAL) {
				alive = false;
			} else if (re & (POLLIN | POLLHUP | POLLERR)) {
				if (c.out.empty())
					alive = read_client(c) && serve(c, be);
				else
					alive = serve(c, be); // POLLOUT-waiting: a hangup shows on send
				if (re & POLLERR && !c.out.empty())
					alive = false;
			} else if (re & POLLOUT) {
				alive = serve(c, be);
			}
			if (alive && s.stopping.load(std::memory_order_acquire) && c.out.empty())
				alive = false;
			if (alive)
				kept.push_back(std::move(c));
			else
				close_fd(c.fd);
		}
		clients = std::move(kept);
		if (pfds[1].revents & POLLIN)
			accept_paused = !accept_clients(s, clients);
	}
	flush_before_exit(clients);
	for (auto &c : clients)
		close_fd(c.fd);
	close_fd(s.listen_fd);
}

void *server_main(void *arg)
{
	// Holds a reference so `s` outlives every waiter.
	std::unique_ptr<std::shared_ptr<server>> ref(static_cast<std::shared_ptr<server> *>(arg));
	std::shared_ptr<server> s = *ref;
	ref.reset();
	pthread_setname_np(pthread_self(), "cmwq-control");
	cmwq_thread_hooks hooks;
	cmwq::detail::thread_hooks_start(CMWQ_THREAD_CONTROL, hooks);
	try {
		run_server(*s);
	} catch (...) {
		cmwq::detail::log_printf(LOG_WARNING, "cmwq: control: internal error; endpoint stopped\n");
	}
	cmwq::detail::thread_hooks_stop(CMWQ_THREAD_CONTROL, hooks);
	s->exited.store(true, std::memory_order_release);
	{
		std::lock_guard<std::mutex> lk(s->mu);
		s->done = true;
	}
	s->cv.notify_all();
	return nullptr;
}

// ---- directory and socket -------------------------------------------------------

// $XDG_RUNTIME_DIR/cmwq when that is an absolute path, else /tmp/cmwq-<euid>.
std::string socket_dir()
{
	const char *x = std::getenv("XDG_RUNTIME_DIR");
	if (x && x[0] == '/')
		return std::string(x) + "/cmwq";
	return "/tmp/cmwq-" + std::to_string(static_cast<unsigned long>(geteuid()));
}

int refuse(const std::string &what, int err)
{
	cmwq::detail::log_printf(LOG_WARNING, "cmwq: control: not started: %s\n", what.c_str());
	return -err;
}

// Creates the directory or checks the one there: ours, a real directory,
// nobody else may enter it.
int prepare_dir(const std::string &dir)
{
	bool created = ::mkdir(dir.c_str(), 0700) == 0;
	if (!created && errno != EEXIST)
		return refuse("cannot create " + dir + ": " + std::strerror(errno), errno);
	struct stat st{};
	if (::lstat(dir.c_str(), &st) != 0)
		return refuse("cannot stat " + dir + ": " + std::strerror(errno), errno);
	if (S_ISLNK(st.st_mode))
		return refuse(dir + " is a symbolic link", ELOOP);
	if (!S_ISDIR(st.st_mode))
		return refuse(dir + " is not a directory", ENOTDIR);
	if (st.st_uid != geteuid())
		return refuse(dir + " is owned by uid " + std::to_string(st.st_uid) +
				      ", not by this process's uid " + std::to_string(geteuid()),
			      EPERM);
	if (created) {
		// The umask may have narrowed 0700; make it exactly that.
		if (::chmod(dir.c_str(), 0700) != 0)
			return refuse("cannot chmod " + dir + ": " + std::strerror(errno), errno);
	} else if (st.st_mode & 077) {
		char mode[8];
		std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
		return refuse(dir + " has mode " + mode +
				      "; it must give no access to group or others (0700)",
			      EPERM);
	}
	return 0;
}

// Whether a listener is behind the socket at path: a non-blocking connect
// that succeeds, or finds the backlog full (EAGAIN: a process that listens
// but does not accept now), is a live one; refused or gone is not. Never
// blocks, so a listener that never accepts cannot hang the caller.
bool socket_is_live(const char *path)
{
	int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return true; // cannot tell: leave it
	sockaddr_un a{};
	a.sun_family = AF_UNIX;
	std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	int rc = ::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a));
	int e = errno;
	::close(fd);
	return rc == 0 || e == EAGAIN || e == EINPROGRESS;
}

// A socket left by an earlier process that had our pid is removed; a live
// one (another pid namespace sharing the directory) is not.
int clear_stale(const std::string &path)
{
	struct stat st{};
	if (::lstat(path.c_str(), &st) != 0)
		return errno == ENOENT ? 0 : refuse("cannot stat " + path + ": " + std::strerror(errno), errno);
	if (!S_ISSOCK(st.st_mode))
		return refuse(path + " exists and is not a socket", EEXIST);
	if (socket_is_live(path.c_str()))
		return refuse(path + " is in use by a live process", EADDRINUSE);
	if (::unlink(path.c_str()) != 0 && errno != ENOENT)
		return refuse("cannot remove stale " + path + ": " + std::strerror(errno), errno);
	return 0;
}

int open_socket(const std::string &path, int &fd_out)
{
	int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return refuse(std::string("socket: ") + std::strerror(errno), errno);
	sockaddr_un a{};
	a.sun_family = AF_UNIX;
	std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
	if (::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
		int e = errno;
		::close(fd);
		return refuse("bind " + path + ": " + std::strerror(e), e);
	}
	// The directory already keeps others out; the mode says so too.
	if (::chmod(path.c_str(), 0600) != 0 || ::listen(fd, listen_backlog) != 0) {
		int e = errno;
		::close(fd);
		::unlink(path.c_str());
		return refuse("cannot set up " + path + ": " + std::strerror(e), e);
	}
	fd_out = fd;
	return 0;
}

// The sockets in dir of processes that no longer exist: <pid>.sock files,
// owned by this user, that accept no connection and whose pid is gone.
// A live process's socket (it accepts, or its pid exists) is left alone.
int remove_stale_sockets(const std::string &dir)
{
	int removed = 0;
	DIR *d = ::opendir(dir.c_str());
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (dirent *e = ::readdir(d)) {
		std::string name = e->d_name;
		if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".sock") != 0)
			continue;
		char *end;
		long pid = std::strtol(name.c_str(), &end, 10);
		if (pid <= 0 || std::string(end) != ".sock" || pid == getpid())
			continue;
		std::string path = dir + "/" + name;
		struct stat st{};
		if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != ::geteuid())
			continue;
		if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
			continue; // the process exists (perhaps starting, or not ours)
		if (!socket_is_live(path.c_str()) && ::unlink(path.c_str()) == 0)
			removed++;
	}
	::closedir(d);
	return removed;
}

// ---- process hooks --------------------------------------------------------------

void at_exit() { cmwq_control_stop(); }

// quick_exit runs no atexit handlers and no destructors: only remove the
// socket (the server thread dies with the process).
void at_quick_exit_hook()
{
	if (path_valid.load(std::memory_order_acquire) && current_owner.load() == getpid())
		::unlink(path_buf);
}

void before_fork() { state_mu.lock(); }
void after_fork_parent() { state_mu.unlock(); }
// The child has no server thread: forget the parent's server without
// touching its socket (the parent still serves it). The thread's reference
// keeps the object alive; its fds are the parent's to close, ours to drop.
// The engine starts it again for the child with its first worker (fork.cpp).
void after_fork_child()
{
	if (current) {
		// Leaked on purpose: the parent's thread holds the other
		// reference and does not exist here.
		close_fd(current->listen_fd);
		close_fd(current->wake_rd);
		close_fd(current->wake_wr);
		current.reset();
	}
	path_valid.store(false, std::memory_order_release);
	state_mu.unlock();
}

} // namespace
} // namespace cmwq::control

using namespace cmwq::control;

extern "C" int cmwq_control_start(void)
{
	std::lock_guard<std::mutex> lk(state_mu);
	if (current && current->owner == getpid() && !current->stopping.load() &&
	    !current->exited.load())
		return 0;
	current.reset(); // a server whose thread gave up; its socket is stale
	std::string dir = socket_dir();
	std::string path = dir + "/" + std::to_string(getpid()) + ".sock";
	if (path.size() >= sizeof(path_buf))
		return refuse("socket path " + path + " is longer than " +
				      std::to_string(sizeof(path_buf) - 1) + " bytes",
			      ENAMETOOLONG);
	if (int rc = prepare_dir(dir))
		return rc;
	if (int rc = clear_stale(path))
		return rc;
	remove_stale_sockets(dir); // sockets of processes that died without stopping it
	auto s = std::make_shared<server>();
	s->owner = getpid();
	if (int rc = open_socket(path, s->listen_fd))
		return rc;
	int p[2];
	if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) {
		int e = errno;
		::unlink(path.c_str());
		return refuse(std::string("pipe: ") + std::strerror(e), e);
	}
	s->wake_rd = p[0];
	s->wake_wr = p[1];

	if (!hooks_installed) {
		if (std::atexit(at_exit) != 0 || std::at_quick_exit(at_quick_exit_hook) != 0 ||
		    pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0) {
			::unlink(path.c_str());
			return refuse("cannot register the exit and fork hooks", ENOMEM);
		}
		hooks_installed = true;
	}

	// The thread takes no signals: they belong to the application's threads.
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	auto *arg = new std::shared_ptr<server>(s);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&s->thread, &attr, server_main, arg);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	if (rc != 0) {
		delete arg;
		::unlink(path.c_str());
		return refuse(std::string("cannot create the server thread: ") + std::strerror(rc), rc);
	}
	std::memcpy(path_buf, path.c_str(), path.size() + 1);
	current_owner.store(getpid());
	path_valid.store(true, std::memory_order_release);
	current = std::move(s);
	return 0;
}

extern "C" int cmwq_control_remove_stale(void)
{
	return remove_stale_sockets(socket_dir());
}

extern "C" void cmwq_control_stop(void)
{
	std::shared_ptr<server> s;
	{
		std::lock_guard<std::mutex> lk(state_mu);
		if (!current)
			return;
		s = std::move(current);
		current.reset();
		if (s->owner != getpid())
			return; // a fork child's copy: the socket is the parent's
		if (path_valid.load(std::memory_order_acquire))
			::unlink(path_buf);
		path_valid.store(false, std::memory_order_release);
		s->stopping.store(true, std::memory_order_release);
		char b = 1;
		(void)!::write(s->wake_wr, &b, 1);
	}
	// Called from a request the server is handling (param cmwq.control 0):
	// the thread finishes that request and exits; nothing to wait for.
	if (pthread_equal(pthread_self(), s->thread))
		return;
	std::unique_lock<std::mutex> lk(s->mu);
	if (!s->cv.wait_for(lk, stop_wait, [&] { return s->done; }))
		cmwq::detail::log_printf(LOG_WARNING, "cmwq: control: the server thread is still busy with a "
				     "request; it will exit when that returns\n");
}

extern "C" const char *cmwq_control_path(void)
{
	return path_valid.load(std::memory_order_acquire) ? path_buf : nullptr;
}

extern "C" char *cmwq_metrics_text(void)
{
	try { // cmwq::snapshot() starts the library if needed
		std::string t = cmwq::control::render_metrics(cmwq::snapshot());
		char *out = static_cast<char *>(malloc(t.size() + 1));
		if (out)
			memcpy(out, t.c_str(), t.size() + 1);
		return out;
	} catch (const std::bad_alloc &) {
		return nullptr;
	}
}
