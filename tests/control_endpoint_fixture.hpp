// control_endpoint_fixture.hpp - what test_control_server_whitebox.cpp and
// test_control_attrs_whitebox.cpp share: a client connection to the real
// endpoint (replies read with a 30 s timeout, so a loaded machine slows the
// tests, never fails them), a private XDG_RUNTIME_DIR with the endpoint
// started in it, and workqueues made visible to it.
#pragma once

#include "control_test_util.hpp"

namespace control_test {

namespace fs = std::filesystem;

inline constexpr int reply_timeout_ms = 30000;

inline int connect_to(const std::string &path)
{
	int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	sockaddr_un a{};
	a.sun_family = AF_UNIX;
	std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
	if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
		::close(fd);
		return -1;
	}
	return fd;
}

inline bool send_all(int fd, const std::string &s)
{
	std::size_t off = 0;
	while (off < s.size()) {
		ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
		if (n <= 0)
			return false;
		off += static_cast<std::size_t>(n);
	}
	return true;
}

// A connection to the endpoint, reading replies with a timeout.
class conn {
public:
	explicit conn(const std::string &path) : fd_(connect_to(path)) {}
	~conn()
	{
		if (fd_ >= 0)
			::close(fd_);
	}
	conn(const conn &) = delete;
	conn &operator=(const conn &) = delete;
	bool ok() const { return fd_ >= 0; }
	int fd() const { return fd_; }

	bool send(const std::string &s) { return send_all(fd_, s); }
	// One line without '\n'; false on EOF or timeout.
	bool read_line(std::string &line)
	{
		for (;;) {
			auto nl = buf_.find('\n');
			if (nl != std::string::npos) {
				line = buf_.substr(0, nl);
				buf_.erase(0, nl + 1);
				return true;
			}
			pollfd p{fd_, POLLIN, 0};
			if (::poll(&p, 1, reply_timeout_ms) <= 0)
				return false;
			char b[65536];
			ssize_t n = ::recv(fd_, b, sizeof(b), 0);
			if (n <= 0)
				return false;
			buf_.append(b, static_cast<std::size_t>(n));
		}
	}
	parsed_reply read_reply()
	{
		parsed_reply r;
		std::string line;
		while (read_line(line)) {
			if (!line.empty() && line[0] == ' ') {
				r.data.push_back(line.substr(1));
				continue;
			}
			r.status = line;
			return r;
		}
		r.status = "<eof or timeout>";
		return r;
	}
	parsed_reply ask(const std::string &req)
	{
		if (!send(req + "\n"))
			return {{}, "<send failed>"};
		return read_reply();
	}
	// true once the server has closed the connection.
	bool at_eof()
	{
		pollfd p{fd_, POLLIN, 0};
		if (::poll(&p, 1, reply_timeout_ms) <= 0)
			return false;
		char b[256];
		return ::recv(fd_, b, sizeof(b), 0) == 0;
	}

private:
	int fd_;
	std::string buf_;
};

inline mode_t mode_of(const std::string &path)
{
	struct stat st{};
	if (::lstat(path.c_str(), &st) != 0)
		return static_cast<mode_t>(-1);
	return st.st_mode & 07777;
}

// Bits of a sysfs hex cpumask ("ff,0000000f") as a set of CPU numbers.
inline std::set<int> mask_cpus(const std::string &hex)
{
	std::set<int> cpus;
	int bit = 0;
	for (auto it = hex.rbegin(); it != hex.rend(); ++it) {
		if (*it == ',')
			continue;
		int v = std::isdigit(static_cast<unsigned char>(*it))
				? *it - '0'
				: std::tolower(static_cast<unsigned char>(*it)) - 'a' + 10;
		for (int k = 0; k < 4; k++, bit++)
			if (v & (1 << k))
				cpus.insert(bit);
	}
	return cpus;
}

inline std::atomic<int> items_run{0};
inline void count_item(work_struct *) { items_run.fetch_add(1); }

// A private runtime directory and the endpoint started in it.
class control_endpoint : public ::testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/cmwq-ctl-test-XXXXXX";
		ASSERT_NE(::mkdtemp(tmpl), nullptr);
		runtime_ = tmpl;
		const char *old = std::getenv("XDG_RUNTIME_DIR");
		had_xdg_ = old != nullptr;
		if (old)
			old_xdg_ = old;
		::setenv("XDG_RUNTIME_DIR", runtime_.c_str(), 1);
	}
	void TearDown() override
	{
		cmwq_control_stop();
		if (had_xdg_)
			::setenv("XDG_RUNTIME_DIR", old_xdg_.c_str(), 1);
		else
			::unsetenv("XDG_RUNTIME_DIR");
		std::error_code ec;
		fs::permissions(runtime_, fs::perms::owner_all, ec);
		fs::remove_all(runtime_, ec);
	}
	std::string start()
	{
		int rc = cmwq_control_start();
		EXPECT_EQ(rc, 0);
		const char *p = cmwq_control_path();
		EXPECT_NE(p, nullptr);
		return p ? p : "";
	}
	std::string dir() const { return runtime_ + "/cmwq"; }

	std::string runtime_, old_xdg_;
	bool had_xdg_ = false;
};

// Workqueues visible to the endpoint, created per test.
class control_attrs : public control_endpoint {
protected:
	void SetUp() override
	{
		control_endpoint::SetUp();
		unbound_ = alloc_workqueue("ctl_test_unbound", WQ_UNBOUND | WQ_SYSFS, 0);
		percpu_ = alloc_workqueue("ctl_test_percpu", WQ_PERCPU | WQ_SYSFS, 0);
		ASSERT_NE(unbound_, nullptr);
		ASSERT_NE(percpu_, nullptr);
		path_ = start();
	}
	void TearDown() override
	{
		if (unbound_)
			destroy_workqueue(unbound_);
		if (percpu_)
			destroy_workqueue(percpu_);
		control_endpoint::TearDown();
	}
	std::string get(conn &c, const std::string &wq, const std::string &attr)
	{
		auto r = c.ask("get " + wq + " " + attr);
		EXPECT_EQ(r.status, "ok") << wq << " " << attr;
		return r.data.size() == 1 ? r.data[0] : "<" + std::to_string(r.data.size()) + " lines>";
	}
	void set_ok(conn &c, const std::string &wq, const std::string &attr, const std::string &v)
	{
		auto r = c.ask("set " + wq + " " + attr + " " + v);
		EXPECT_EQ(r.status, "ok") << wq << " " << attr << " " << v;
	}
	// The value is refused with `err` and a message naming the attribute,
	// and reads back unchanged.
	void set_refused(conn &c, const std::string &wq, const std::string &attr,
			 const std::string &v, const std::string &err)
	{
		std::string before = get(c, wq, attr);
		auto r = c.ask("set " + wq + " " + attr + " " + v);
		EXPECT_TRUE(starts_with(r.status, "error " + err + " ")) << attr << "=" << v << ": "
									 << r.status;
		EXPECT_NE(r.status.find(attr), std::string::npos) << r.status;
		EXPECT_EQ(get(c, wq, attr), before) << attr << "=" << v;
	}

	workqueue_struct *unbound_ = nullptr;
	workqueue_struct *percpu_ = nullptr;
	std::string path_;
};

} // namespace control_test
