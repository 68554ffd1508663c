// fds.cpp - the library's file descriptors: they never take the program's
// last ones.
//
// The program's descriptors are the program's. The library holds one spare
// descriptor from the monitor's start on, and opens every short-lived file
// (a thread's /proc stat, the probe of a context-switch event, the count of
// the process's descriptors) in the spare's slot: it closes the spare first
// and keeps what it opened as the new spare, so at no moment does it hold
// more than that one. A new library thread, whose first malloc opens a
// file in glibc, starts with the spare's slot lent to it. Long-lived
// descriptors (the workers' events, the epoll set and its eventfd) are
// opened only while at least FD_LEFT_TO_PROGRAM stay free under the soft
// RLIMIT_NOFILE, read again at each such open, so a limit the program
// lowers later is followed.
#include "engine/engine.h"

#include <dirent.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace cmwq::detail {
namespace {

struct spare_state {
	mutex lock; // a leaf: taken with no engine lock or under D
	int fd GUARDED_BY(lock) = -1;
};

spare_state &spare()
{
	static spare_state *s = new spare_state;
	return *s;
}

// Context: the spare's lock held. Entries of /proc/self/fd read through
// dirfd, "." and ".." left out; -1 if unreadable.
long count_entries(int dirfd)
{
	char buf[4096];
	long n = 0;
	for (;;) {
		long got = syscall(SYS_getdents64, dirfd, buf, sizeof(buf));
		if (got < 0)
			return -1;
		if (got == 0)
			return n;
		for (long off = 0; off < got;) {
			unsigned short reclen;
			memcpy(&reclen, buf + off + 16, sizeof(reclen)); // d_reclen follows d_ino, d_off
			const char *name = buf + off + 19;
			if (strcmp(name, ".") && strcmp(name, ".."))
				n++;
			off += reclen;
		}
	}
}

// Descriptors free below the soft limit, counted without opening one:
// poll() says POLLNVAL for a number that is not open. Only when the spare
// was lost, so its cost (a pass over the table) is rare.
long free_fds()
{
	long limit = fd_limit();
	if (limit > (1L << 20))
		limit = 1L << 20;
	std::vector<pollfd> p(4096);
	long open_now = 0;
	for (long base = 0; base < limit; base += static_cast<long>(p.size())) {
		size_t n = static_cast<size_t>(std::min<long>(static_cast<long>(p.size()), limit - base));
		for (size_t i = 0; i < n; i++)
			p[i] = {static_cast<int>(base + static_cast<long>(i)), 0, 0};
		if (poll(p.data(), n, 0) < 0)
			return 0;
		for (size_t i = 0; i < n; i++)
			open_now += !(p[i].revents & POLLNVAL);
	}
	return limit - open_now;
}

} // namespace

void fd_spare_take()
{
	auto &s = spare();
	lock_guard lk(s.lock);
	if (s.fd < 0)
		s.fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

bool with_spare_fd(const std::function<int()> &open_fn, const std::function<void(int)> &use_fn, bool keep)
{
	auto &s = spare();
	lock_guard lk(s.lock);
	if (s.fd < 0) {
		// Lost (the program took the slot while it was free, or start-up
		// found none): a new one only while two stay free, so it is never
		// the program's last.
		if (free_fds() < 2) {
			errno = EMFILE;
			return false;
		}
		s.fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (s.fd < 0)
			return false;
	}
	close(s.fd);
	s.fd = open_fn();
	if (s.fd < 0) {
		// Nothing opened (a thread that exited, a file that is not there):
		// the slot just freed is the spare again.
		int e = errno;
		s.fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		errno = e;
		return false;
	}
	use_fn(s.fd);
	if (!keep) {
		// Not worth keeping (an event costs its thread at every switch):
		// /dev/null in the slot just freed.
		close(s.fd);
		s.fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	return true;
}

int with_spare_lent(const std::function<int()> &fn)
{
	auto &s = spare();
	lock_guard lk(s.lock);
	// Without a spare (lost, or none at start) the slot fn's open takes is
	// one the program could have had: no worse than before the spare.
	bool had = s.fd >= 0;
	if (had) {
		close(s.fd);
		s.fd = -1;
	}
	int rc = fn();
	if (had)
		s.fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return rc;
}

long fd_limit()
{
	rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1ul << 30))
		return 1L << 30;
	return static_cast<long>(rl.rlim_cur);
}

long open_fd_count()
{
	long n = -1;
	with_spare_fd([] { return open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC); },
		      [&](int fd) { n = count_entries(fd); });
	return n; // counts the directory itself, which stays open as the spare
}

bool fds_to_spare(long more)
{
	errno = 0;
	long open_now = open_fd_count();
	if (open_now < 0 && (errno == EMFILE || errno == ENFILE))
		return false; // not even the spare's slot could be had
	if (open_now < 0)
		return true; // no /proc: the callers' own check of the number they got is all there is
	return fd_limit() - open_now - more >= FD_LEFT_TO_PROGRAM;
}

std::string read_small_file(const std::string &path)
{
	std::string out;
	with_spare_fd([&] { return open(path.c_str(), O_RDONLY | O_CLOEXEC); },
		      [&](int fd) {
			      char buf[4096];
			      while (out.size() < 65536) {
				      ssize_t n = read(fd, buf, sizeof(buf));
				      if (n <= 0)
					      break;
				      out.append(buf, static_cast<size_t>(n));
			      }
		      });
	return out;
}

void fd_fork_lock() NO_THREAD_SAFETY_ANALYSIS
{
	spare().lock.lock();
}

void fd_fork_unlock() NO_THREAD_SAFETY_ANALYSIS
{
	spare().lock.unlock();
}

} // namespace cmwq::detail
