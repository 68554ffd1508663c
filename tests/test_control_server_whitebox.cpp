// test_control_server_whitebox.cpp - the real control endpoint against the library
// in-process: the socket's directory and permissions, slow, hostile and
// concurrent clients (the attributes and parameters over the wire:
// test_control_attrs_whitebox.cpp).
//
// Socket tests use a private XDG_RUNTIME_DIR under /tmp and generous
// timeouts (30 s per reply) so a loaded machine slows them, never fails them.
#include "control_endpoint_fixture.hpp"

namespace fs = std::filesystem;
using namespace control_test;

// ---- the real endpoint ------------------------------------------------------------

TEST_F(control_endpoint, start_creates_private_directory_and_socket)
{
	std::string path = start();
	EXPECT_EQ(path, dir() + "/" + std::to_string(::getpid()) + ".sock");
	EXPECT_EQ(mode_of(dir()), 0700u);
	EXPECT_EQ(mode_of(path), 0600u);
	struct stat st{};
	ASSERT_EQ(::lstat(path.c_str(), &st), 0);
	EXPECT_TRUE(S_ISSOCK(st.st_mode));
	EXPECT_EQ(cmwq_control_start(), 0) << "start is idempotent";
	EXPECT_EQ(std::string(cmwq_control_path()), path);
	conn c(path);
	ASSERT_TRUE(c.ok());
	EXPECT_EQ(c.ask("help").status, "ok");
}

TEST_F(control_endpoint, directory_is_made_0700_despite_umask)
{
	mode_t old = ::umask(0077 | 0200);
	int rc = cmwq_control_start();
	::umask(old);
	ASSERT_EQ(rc, 0);
	EXPECT_EQ(mode_of(dir()), 0700u);
	EXPECT_EQ(mode_of(cmwq_control_path()), 0600u);
}

TEST_F(control_endpoint, stop_removes_socket_and_start_again_works)
{
	std::string path = start();
	cmwq_control_stop();
	EXPECT_EQ(cmwq_control_path(), nullptr);
	EXPECT_FALSE(fs::exists(fs::symlink_status(path)));
	EXPECT_LT(connect_to(path), 0);
	cmwq_control_stop(); // stopping twice is harmless
	std::string again = start();
	EXPECT_EQ(again, path);
	conn c(again);
	ASSERT_TRUE(c.ok());
	EXPECT_EQ(c.ask("ls").status, "ok");
}

TEST_F(control_endpoint, stale_socket_of_an_earlier_process_is_replaced)
{
	ASSERT_EQ(::mkdir(dir().c_str(), 0700), 0);
	std::string path = dir() + "/" + std::to_string(::getpid()) + ".sock";
	int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
	sockaddr_un a{};
	a.sun_family = AF_UNIX;
	std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
	ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
	::close(fd); // bound, never listened: what a crashed process leaves
	EXPECT_EQ(start(), path);
	conn c(path);
	ASSERT_TRUE(c.ok());
	EXPECT_EQ(c.ask("ls").status, "ok");
}

// A socket whose listener never accepts and whose backlog is full (a hung
// process, or one that reuses a dead pid's name) must not hang the sweep
// of stale sockets, nor a start that runs it: the probe connect never
// blocks, and a listener found that way is live, so its socket stays. A
// dead process's socket beside it (bound, never listened) is removed.
TEST_F(control_endpoint, a_listener_that_never_accepts_does_not_hang_the_stale_sweep)
{
	ASSERT_EQ(::mkdir(dir().c_str(), 0700), 0);
	auto dead_pid = [] {
		pid_t p = ::fork();
		if (p == 0)
			::_exit(0);
		::waitpid(p, nullptr, 0);
		return p; // gone, and not reused this soon on a machine with free pids
	};
	auto bind_at = [](const std::string &path, int &fd) {
		fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		sockaddr_un a{};
		a.sun_family = AF_UNIX;
		std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
		return ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0;
	};
	std::string hung = dir() + "/" + std::to_string(dead_pid()) + ".sock";
	std::string gone = dir() + "/" + std::to_string(dead_pid()) + ".sock";
	int lfd = -1, gfd = -1;
	ASSERT_TRUE(bind_at(hung, lfd));
	ASSERT_EQ(::listen(lfd, 0), 0);
	ASSERT_TRUE(bind_at(gone, gfd));
	::close(gfd);
	std::vector<int> fill; // fill the backlog: a blocking connect now waits
	for (int i = 0; i < 4; i++) {
		int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		sockaddr_un a{};
		a.sun_family = AF_UNIX;
		std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", hung.c_str());
		(void)::connect(c, reinterpret_cast<sockaddr *>(&a), sizeof(a));
		fill.push_back(c);
	}
	std::atomic<int> removed{-100};
	std::thread sweep([&] { removed = cmwq_control_remove_stale(); });
	for (int i = 0; i < 1000 && removed.load() == -100; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	bool returned = removed.load() != -100;
	if (!returned) // unblock it so the test ends: the bug is already shown
		::close(lfd), lfd = -1;
	sweep.join();
	EXPECT_TRUE(returned) << "cmwq_control_remove_stale blocked on a listener that never accepts";
	EXPECT_EQ(removed.load(), 1) << "only the dead process's socket goes";
	struct stat st{};
	EXPECT_EQ(::lstat(hung.c_str(), &st), 0) << "the live listener's socket was removed";
	EXPECT_NE(::lstat(gone.c_str(), &st), 0);
	EXPECT_FALSE(start().empty()) << "start sweeps too and must return";
	for (int c : fill)
		::close(c);
	if (lfd >= 0)
		::close(lfd);
}

TEST_F(control_endpoint, refuses_directory_open_to_group_or_others)
{
	ASSERT_EQ(::mkdir(dir().c_str(), 0700), 0);
	ASSERT_EQ(::chmod(dir().c_str(), 0750), 0);
	::testing::internal::CaptureStderr();
	EXPECT_EQ(cmwq_control_start(), -EPERM);
	std::string err = ::testing::internal::GetCapturedStderr();
	EXPECT_NE(err.find("mode 0750"), std::string::npos) << err;
	EXPECT_EQ(cmwq_control_path(), nullptr);
}

TEST_F(control_endpoint, refuses_symlinked_directory)
{
	std::string target = runtime_ + "/elsewhere";
	ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);
	ASSERT_EQ(::symlink(target.c_str(), dir().c_str()), 0);
	::testing::internal::CaptureStderr();
	EXPECT_EQ(cmwq_control_start(), -ELOOP);
	std::string err = ::testing::internal::GetCapturedStderr();
	EXPECT_NE(err.find("symbolic link"), std::string::npos) << err;
	EXPECT_TRUE(fs::is_empty(target));
}

TEST_F(control_endpoint, refuses_directory_owned_by_another_user)
{
	if (::geteuid() != 0)
		GTEST_SKIP() << "needs root to chown a directory to another uid";
	ASSERT_EQ(::mkdir(dir().c_str(), 0700), 0);
	ASSERT_EQ(::chown(dir().c_str(), 65534, 65534), 0);
	::testing::internal::CaptureStderr();
	EXPECT_EQ(cmwq_control_start(), -EPERM);
	std::string err = ::testing::internal::GetCapturedStderr();
	EXPECT_NE(err.find("owned by uid 65534"), std::string::npos) << err;
}

TEST_F(control_endpoint, falls_back_to_tmp_without_xdg_runtime_dir)
{
	::unsetenv("XDG_RUNTIME_DIR");
	std::string fallback = "/tmp/cmwq-" + std::to_string(::geteuid());
	int rc = cmwq_control_start();
	if (rc == -EPERM || rc == -ELOOP || rc == -ENOTDIR)
		GTEST_SKIP() << fallback << " exists and is not usable here";
	ASSERT_EQ(rc, 0);
	std::string path = cmwq_control_path();
	EXPECT_EQ(path, fallback + "/" + std::to_string(::getpid()) + ".sock");
	EXPECT_EQ(mode_of(fallback), 0700u);
	cmwq_control_stop();
	EXPECT_FALSE(fs::exists(fs::symlink_status(path)));
	::rmdir(fallback.c_str()); // only if nothing else lives there
}

TEST_F(control_endpoint, fork_child_leaves_parent_socket_alone)
{
	std::string path = start();
	pid_t pid = ::fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		// What the child's exit handler does.
		cmwq_control_stop();
		_exit(cmwq_control_path() == nullptr ? 0 : 1);
	}
	int status = 0;
	ASSERT_EQ(::waitpid(pid, &status, 0), pid);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	EXPECT_TRUE(fs::exists(fs::symlink_status(path)));
	conn c(path);
	ASSERT_TRUE(c.ok());
	EXPECT_EQ(c.ask("ls").status, "ok");
}

TEST_F(control_endpoint, garbage_partial_and_oversized_requests_keep_it_serving)
{
	std::string path = start();
	{
		conn c(path);
		ASSERT_TRUE(c.ok());
		auto r = c.ask("frobnicate now");
		EXPECT_TRUE(starts_with(r.status, "error EINVAL unknown request 'frobnicate'")) << r.status;
		EXPECT_TRUE(starts_with(c.ask("").status, "error EINVAL empty request"));
		ASSERT_TRUE(c.send(std::string("get\0\xff\x01 x\n", 9)));
		EXPECT_TRUE(starts_with(c.read_reply().status, "error EINVAL request contains control"));
		std::string bin;
		for (int i = 1; i < 256; i++)
			if (i != '\n')
				bin += static_cast<char>(i);
		ASSERT_TRUE(c.send(bin + "\n"));
		EXPECT_TRUE(starts_with(c.read_reply().status, "error EINVAL"));
		// Pipelined requests are answered in order.
		ASSERT_TRUE(c.send("help\nls\r\nbogus\n"));
		EXPECT_EQ(c.read_reply().status, "ok");
		EXPECT_EQ(c.read_reply().status, "ok");
		EXPECT_TRUE(starts_with(c.read_reply().status, "error EINVAL"));
		// A request split across writes.
		ASSERT_TRUE(c.send("he"));
		std::this_thread::sleep_for(std::chrono::milliseconds(20));
		ASSERT_TRUE(c.send("lp\n"));
		EXPECT_EQ(c.read_reply().status, "ok");
	}
	{
		conn c(path);
		ASSERT_TRUE(c.ok());
		std::string huge(ctl::max_request + 1000, 'a');
		c.send(huge); // the server may close before all of it is read
		auto r = c.read_reply();
		EXPECT_EQ(r.status, "error E2BIG request too long");
		EXPECT_TRUE(c.at_eof());
	}
	{
		conn c(path); // a last request without newline, then EOF
		ASSERT_TRUE(c.ok());
		ASSERT_TRUE(c.send("help"));
		::shutdown(c.fd(), SHUT_WR);
		EXPECT_EQ(c.read_reply().status, "ok");
		EXPECT_TRUE(c.at_eof());
	}
	{
		conn c(path); // a partial line, then gone
		ASSERT_TRUE(c.ok());
		ASSERT_TRUE(c.send("get something"));
	}
	conn c(path);
	ASSERT_TRUE(c.ok());
	EXPECT_EQ(c.ask("ls").status, "ok");
	EXPECT_EQ(c.ask("quit").status, "ok bye");
	EXPECT_TRUE(c.at_eof());
}

TEST_F(control_endpoint, clients_that_vanish_mid_reply_do_not_stop_it)
{
	std::string path = start();
	for (int i = 0; i < 20; i++) {
		conn c(path);
		ASSERT_TRUE(c.ok());
		// Ask for a lot and leave without reading.
		std::string many;
		for (int k = 0; k < 50; k++)
			many += "metrics\n";
		c.send(many);
	}
	conn c(path);
	ASSERT_TRUE(c.ok());
	auto r = c.ask("metrics");
	EXPECT_EQ(r.status, "ok");
	ASSERT_FALSE(r.data.empty());
	EXPECT_EQ(r.data.back(), "# EOF");
}

TEST_F(control_endpoint, several_clients_are_served_at_once)
{
	std::string path = start();
	conn idle(path); // connected, says nothing
	ASSERT_TRUE(idle.ok());
	conn partial(path);
	ASSERT_TRUE(partial.ok());
	ASSERT_TRUE(partial.send("get ctl_"));
	std::vector<std::thread> ts;
	std::atomic<int> good{0};
	for (int t = 0; t < 4; t++)
		ts.emplace_back([&] {
			conn c(path);
			for (int i = 0; i < 25; i++)
				if (c.ok() && c.ask("params").status == "ok")
					good++;
		});
	for (auto &t : ts)
		t.join();
	EXPECT_EQ(good.load(), 100);
	ASSERT_TRUE(partial.send("x y\n"));
	EXPECT_TRUE(starts_with(partial.read_reply().status, "error ENOENT"));
}

TEST_F(control_endpoint, clients_over_the_limit_get_ebusy)
{
	std::string path = start();
	std::vector<std::unique_ptr<conn>> held;
	for (int i = 0; i < 64; i++) {
		held.push_back(std::make_unique<conn>(path));
		ASSERT_TRUE(held.back()->ok());
	}
	// The 64 are accepted once the server has seen them all.
	EXPECT_EQ(held.back()->ask("help").status, "ok");
	conn extra(path);
	ASSERT_TRUE(extra.ok());
	EXPECT_EQ(extra.read_reply().status, "error EBUSY too many clients");
	held.pop_back();
	// A slot is free again once the server notices the close.
	bool served = false;
	for (int attempt = 0; attempt < 100 && !served; attempt++) {
		conn again(path);
		served = again.ok() && again.ask("ls").status == "ok";
		if (!served)
			std::this_thread::sleep_for(std::chrono::milliseconds(20));
	}
	EXPECT_TRUE(served);
	EXPECT_EQ(held.front()->ask("ls").status, "ok");
}

TEST_F(control_endpoint, another_uid_is_refused)
{
	if (::geteuid() != 0)
		GTEST_SKIP() << "needs root to run a client as uid 65534";
	std::string path = start();
	// With the normal permissions the other user cannot even reach the
	// socket; then, with the directory and socket opened up on purpose,
	// the SO_PEERCRED check still refuses it.
	for (bool opened : {false, true}) {
		if (opened) {
			ASSERT_EQ(::chmod(runtime_.c_str(), 0711), 0);
			ASSERT_EQ(::chmod(dir().c_str(), 0711), 0);
			ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
		}
		pid_t pid = ::fork();
		ASSERT_GE(pid, 0);
		if (pid == 0) {
			if (::setgid(65534) != 0 || ::setuid(65534) != 0)
				_exit(10);
			int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
			sockaddr_un a{};
			a.sun_family = AF_UNIX;
			std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
			if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0)
				_exit(errno == EACCES ? 20 : 21);
			(void)!::send(fd, "ls\n", 3, MSG_NOSIGNAL); // it may be closed already
			char buf[512];
			std::size_t got = 0;
			for (;;) {
				pollfd p{fd, POLLIN, 0};
				if (::poll(&p, 1, reply_timeout_ms) <= 0)
					_exit(30);
				ssize_t n = ::read(fd, buf + got, sizeof(buf) - 1 - got);
				if (n == 0 || (n < 0 && errno == ECONNRESET))
					break; // closed, possibly with our request unread
				if (n < 0)
					_exit(31);
				got += static_cast<std::size_t>(n);
				if (got == sizeof(buf) - 1)
					_exit(32);
			}
			buf[got] = '\0';
			_exit(std::strncmp(buf, "error EACCES ", 13) == 0 ? 0 : 33);
		}
		int status = 0;
		ASSERT_EQ(::waitpid(pid, &status, 0), pid);
		ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
		EXPECT_EQ(WEXITSTATUS(status), opened ? 0 : 20)
			<< (opened ? "peer check" : "file permissions");
	}
	conn c(path);
	ASSERT_TRUE(c.ok());
	EXPECT_EQ(c.ask("ls").status, "ok") << "the owner is still served";
}

TEST_F(control_endpoint, quick_exit_removes_the_socket)
{
#if defined(__SANITIZE_THREAD__)
	GTEST_SKIP() << "the child starts a thread after a multi-threaded fork, which TSan refuses";
#endif
	start(); // installs the process hooks, inherited by the child
	cmwq_control_stop();
	pid_t pid = ::fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		if (cmwq_control_start() != 0)
			_exit(2);
		std::string mine = cmwq_control_path();
		if (!fs::exists(fs::symlink_status(mine)))
			_exit(3);
		std::quick_exit(0);
	}
	int status = 0;
	ASSERT_EQ(::waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status)) << status;
	ASSERT_EQ(WEXITSTATUS(status), 0);
	EXPECT_FALSE(fs::exists(fs::symlink_status(dir() + "/" + std::to_string(pid) + ".sock")))
		<< "quick_exit left the socket behind";
}

namespace {
// A socket file at path that nobody listens on (what a killed process leaves).
void leave_socket(const std::string &path)
{
	int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
	ASSERT_GE(fd, 0);
	sockaddr_un a{};
	a.sun_family = AF_UNIX;
	std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
	ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
	::close(fd);
}

pid_t dead_pid()
{
	pid_t pid = ::fork();
	if (pid == 0)
		_exit(0);
	int status;
	::waitpid(pid, &status, 0);
	return pid;
}
} // namespace

TEST_F(control_endpoint, sockets_of_dead_processes_are_removed_live_ones_kept)
{
	// Forked before the endpoint runs: a child of a running endpoint starts
	// its own, and _exit would leave that socket too.
	pid_t d1 = dead_pid(), d2 = dead_pid();
	std::string mine = start();
	std::string dead = dir() + "/" + std::to_string(d1) + ".sock";
	std::string dead2 = dir() + "/" + std::to_string(d2) + ".sock";
	// The parent of this test is alive; its (unserved) socket is not ours to judge.
	std::string alive = dir() + "/" + std::to_string(::getppid()) + ".sock";
	leave_socket(dead);
	leave_socket(dead2);
	leave_socket(alive);
	EXPECT_EQ(cmwq_control_remove_stale(), 2);
	EXPECT_FALSE(fs::exists(fs::symlink_status(dead)));
	EXPECT_FALSE(fs::exists(fs::symlink_status(dead2)));
	EXPECT_TRUE(fs::exists(fs::symlink_status(alive)));
	EXPECT_TRUE(fs::exists(fs::symlink_status(mine)));
	// Starting the endpoint sweeps too.
	leave_socket(dead);
	cmwq_control_stop();
	start();
	EXPECT_FALSE(fs::exists(fs::symlink_status(dead)));
	EXPECT_TRUE(fs::exists(fs::symlink_status(alive)));
	::unlink(alive.c_str());
}
