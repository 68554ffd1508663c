// wq_asio_bench - Asio's kind of programs on cmwq's Asio executor
// (<cmwq/asio.hpp>) against Asio's own pools, in the same run:
//
//   actor: a ring of actors, each a strand over an any_io_executor; tokens
//          hop from one actor to the next with defer (Asio's actor example,
//          examples/cpp11/executors/actor.cpp: 503 actors, one token each
//          by default). Asio: P x thread_pool(1), consecutive blocks of
//          actors/P actors on one pool (as that example places them), and
//          one thread_pool(N); cmwq: strands over one workqueue (unbound,
//          per-CPU, ordered).
//   echo:  a TCP echo server on loopback whose sockets use the executor
//          under test; C client threads (blocking sockets) each make R round
//          trips of 64 bytes. Asio: io_context run by N threads and
//          thread_pool(N); cmwq: the same three workqueues, then the
//          unbound and per-CPU ones with cmwq::asio::reactor (Asio's
//          reactor run by the workqueue's workers).
//
// Each line prints the rate and its ratio to the first Asio line of its
// protocol. Timing only; checks of behaviour are the tests' (test_asio).
//
//   wq_asio_bench [--protocol actor|echo|all] [--threads N] [--actor-pools P] [--actors A]
//                 [--hops H] [--tokens K] [--clients C] [--round-trips R]
//                 [--repeat N] [--only TEXT]
//
// The lines of a protocol run in alternated rounds, --repeat of them, each
// round starting one line further on; the best of each line is printed,
// and the median over the rounds of its ratio to the first line's run in
// the same round. The first line runs once more as the last ("again"):
// its ratio is the spread between two runs of the same code.
#include <cmwq/asio_reactor.hpp>
#include <cmwq/params.h>
#include <cmwq/workqueue.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>

#include <CLI/CLI.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

struct options {
	std::string protocol = "all";
	int threads = 0; // 0: the online CPUs
	int actor_pools = 16; // Asio's actor example: 16 x thread_pool(1)
	int actors = 503;
	long hops = 2000000;
	int tokens = 0; // 0: one per actor, as Asio's example
	int clients = 8;
	int round_trips = 20000;
	int repeat = 3;
	std::string only; // run only the lines whose label contains it (and the first, for the ratio)
};

const options *opts = nullptr;
// The label contains --only's text; a text ending in '$' must end the
// label ("cmwq per-CPU, 16 executors$" is not the block_detect=sample line).
bool wanted(const std::string &who)
{
	const std::string &t = opts->only;
	if (t.empty())
		return true;
	if (t.back() != '$')
		return who.find(t) != std::string::npos;
	return std::string_view(who).ends_with(std::string_view(t).substr(0, t.size() - 1));
}

double seconds_since(std::chrono::steady_clock::time_point t0)
{
	return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- actor ------------------------------------------------------------------

// As the example: each actor's messages run on a strand over a
// type-erased executor.
struct actor {
	net::strand<net::any_io_executor> strand;
	actor *next = nullptr;
	explicit actor(const net::any_io_executor &ex) : strand(ex) {}
};

struct hop {
	actor *at;
	long left;
	std::atomic<int> *running;
	std::promise<void> *done;
	void operator()() const
	{
		if (left == 0) {
			if (running->fetch_sub(1) == 1)
				done->set_value();
			return;
		}
		actor *n = at->next;
		net::defer(n->strand, hop{n, left - 1, running, done});
	}
};

// Hops per second over a ring of actors on the executors given: blocks of
// actors/size consecutive actors on one executor, as the example places
// them on its pools.
template <class Ex>
double actor_rate(const std::vector<Ex> &exs, const options &o)
{
	std::vector<std::unique_ptr<actor>> ring;
	size_t per = std::max<size_t>(1, static_cast<size_t>(o.actors) / exs.size());
	for (int i = 0; i < o.actors; i++)
		ring.push_back(std::make_unique<actor>(net::any_io_executor(exs[(static_cast<size_t>(i) / per) % exs.size()])));
	for (int i = 0; i < o.actors; i++)
		ring[static_cast<size_t>(i)]->next = ring[static_cast<size_t>((i + 1) % o.actors)].get();
	int tokens = o.tokens ? o.tokens : o.actors;
	std::atomic<int> running{tokens};
	std::promise<void> done;
	auto f = done.get_future();
	long per_token = o.hops / tokens;
	auto t0 = std::chrono::steady_clock::now();
	for (int k = 0; k < tokens; k++) {
		actor *a = ring[static_cast<size_t>(k * o.actors / tokens)].get();
		net::post(a->strand, hop{a, per_token, &running, &done});
	}
	f.wait();
	double s = seconds_since(t0);
	return static_cast<double>(per_token * tokens) / s;
}

// ---- echo -------------------------------------------------------------------

template <class Ex>
struct session : std::enable_shared_from_this<session<Ex>> {
	net::basic_stream_socket<tcp, Ex> sock;
	char buf[64];
	explicit session(net::basic_stream_socket<tcp, Ex> s) : sock(std::move(s)) {}
	void read()
	{
		auto self = this->shared_from_this();
		sock.async_read_some(net::buffer(buf), [self](boost::system::error_code ec, std::size_t n) {
			if (ec)
				return;
			net::async_write(self->sock, net::buffer(self->buf, n),
					 [self](boost::system::error_code ec2, std::size_t) {
						 if (!ec2)
							 self->read();
					 });
		});
	}
};

template <class Ex>
struct server {
	net::basic_socket_acceptor<tcp, Ex> acceptor;
	Ex ex;
	explicit server(const Ex &e) : acceptor(e, tcp::endpoint(net::ip::address_v4::loopback(), 0)), ex(e) {}
	void accept()
	{
		acceptor.async_accept([this](boost::system::error_code ec, net::basic_stream_socket<tcp, Ex> s) {
			if (ec)
				return;
			s.set_option(tcp::no_delay(true));
			std::make_shared<session<Ex>>(std::move(s))->read();
			accept();
		});
	}
	unsigned short port() { return acceptor.local_endpoint().port(); }
};

// One client: R blocking round trips of 64 bytes.
bool client(unsigned short port, int round_trips)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	bool ok = connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0;
	char msg[64] = "ping", back[64];
	for (int i = 0; ok && i < round_trips; i++) {
		ok = write(fd, msg, sizeof(msg)) == sizeof(msg);
		size_t got = 0;
		while (ok && got < sizeof(back)) {
			ssize_t n = read(fd, back + got, sizeof(back) - got);
			ok = n > 0;
			got += ok ? static_cast<size_t>(n) : 0;
		}
	}
	close(fd);
	return ok;
}

// Round trips per second against a server on ex; 0 when a client failed.
template <class Ex>
double echo_rate(const Ex &ex, const options &o)
{
	auto srv = std::make_unique<server<Ex>>(ex);
	unsigned short port = srv->port();
	net::post(ex, [s = srv.get()] { s->accept(); });
	std::atomic<bool> failed{false};
	auto t0 = std::chrono::steady_clock::now();
	std::vector<std::thread> cs;
	for (int c = 0; c < o.clients; c++)
		cs.emplace_back([&] {
			if (!client(port, o.round_trips))
				failed = true;
		});
	for (auto &t : cs)
		t.join();
	double s = seconds_since(t0);
	std::promise<void> closed;
	net::post(ex, [&] {
		boost::system::error_code ec;
		srv->acceptor.close(ec);
		closed.set_value();
	});
	closed.get_future().wait();
	return failed ? 0 : static_cast<double>(o.clients) * o.round_trips / s;
}

// ---- the runs ---------------------------------------------------------------

void line(const char *protocol, const std::string &who, double rate, double base, double median, const char *unit)
{
	std::printf("%-6s %-52s %12.0f %s  %5.2fx  (median of rounds %4.2fx)\n", protocol, who.c_str(), rate, unit,
		    base > 0 ? rate / base : 0.0, median);
	std::fflush(stdout);
}

double median_of(std::vector<double> v)
{
	if (v.empty())
		return 0.0;
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The lines of one protocol, run in alternated rounds (each line once a
// round, --repeat rounds, each round starting one line further on) so that
// a drift of the machine's speed, and a line's place in the round, fall on
// every line alike; the best of each is printed, with its ratio to the
// first line's best, and the median over the rounds of its ratio to the
// first line's run of the same round (a drift between rounds cancels out
// of each round's ratio).
struct runs {
	const char *protocol;
	const char *unit;
	std::vector<std::pair<std::string, std::function<double()>>> lines;
	void add(std::string who, std::function<double()> f)
	{
		if (lines.empty() || wanted(who))
			lines.emplace_back(std::move(who), std::move(f));
	}
	// The first line runs once more as the last, "again": two runs of the
	// same code, whose ratio shows the spread of this machine in this run.
	void report(int repeat)
	{
		if (!lines.empty() && wanted("again"))
			lines.emplace_back(lines[0].first + " again", lines[0].second);
		std::vector<double> best(lines.size(), 0.0);
		std::vector<std::vector<double>> ratios(lines.size());
		size_t n = lines.size();
		for (int r = 0; r < repeat; r++) {
			// Each round starts one line further on: a line's place in
			// the round (the first of a round ran measurably faster on
			// the 2-vCPU VM, about 3% for two identical lines) falls on
			// every line alike.
			std::vector<double> v(n, 0.0);
			for (size_t k = 0; k < n; k++) {
				size_t i = (static_cast<size_t>(r) + k) % n;
				v[i] = lines[i].second();
				best[i] = std::max(best[i], v[i]);
			}
			for (size_t i = 0; i < n && v[0] > 0; i++)
				ratios[i].push_back(v[i] / v[0]);
		}
		for (size_t i = 0; i < lines.size(); i++)
			line(protocol, lines[i].first, best[i], best[0], median_of(ratios[i]), unit);
	}
};

struct cmwq_kind {
	const char *name;
	unsigned flags;
	int max_active;
};
const cmwq_kind kinds[] = {
	{"cmwq unbound", WQ_UNBOUND, 0},
	{"cmwq per-CPU", WQ_PERCPU, 0},
	{"cmwq ordered", WQ_UNBOUND | __WQ_ORDERED, 1},
};

// The CPUs this process may run on.
std::vector<int> allowed_cpus()
{
	std::vector<int> cpus;
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &set))
				cpus.push_back(c);
	if (cpus.empty())
		cpus.push_back(0);
	return cpus;
}

void run_actor(const options &o, int threads)
{
	const std::vector<int> cpus = allowed_cpus();
	int n = o.actor_pools;
	runs rs{"actor", "hops/s", {}};
	rs.add(std::to_string(n) + " x asio::thread_pool(1)", [&] {
		std::vector<std::unique_ptr<net::thread_pool>> pools;
		std::vector<net::thread_pool::executor_type> exs;
		for (int i = 0; i < n; i++) {
			pools.push_back(std::make_unique<net::thread_pool>(1));
			exs.push_back(pools.back()->get_executor());
		}
		double r = actor_rate(exs, o);
		for (auto &p : pools)
			p->join();
		return r;
	});
	rs.add("asio::thread_pool(" + std::to_string(threads) + ")", [&] {
		net::thread_pool pool(static_cast<size_t>(threads));
		double r = actor_rate(std::vector<net::thread_pool::executor_type>{pool.get_executor()}, o);
		pool.join();
		return r;
	});
	// cmwq: one executor over the workqueue, then P executors over it in
	// the example's place of its P pools (each executor has counters of
	// its own, as each of Asio's pools has); on a per-CPU workqueue each
	// is bound to a CPU, as each of the example's pools is one thread.
	for (auto &k : kinds)
		for (int execs : {1, n})
			rs.add(std::string(k.name) + (execs == 1 ? "" : ", " + std::to_string(execs) + " executors"), [&, execs] {
				cmwq::workqueue wq("bench_actor", k.flags, k.max_active);
				std::vector<cmwq::asio::executor> exs;
				for (int i = 0; i < execs; i++) {
					cmwq::asio::executor ex(wq);
					exs.push_back(execs > 1 && !(k.flags & WQ_UNBOUND) ? ex.on_cpu(cpus[static_cast<size_t>(i) % cpus.size()]) : ex);
				}
				double v = actor_rate(exs, o);
				for (auto &ex : exs)
					ex.join();
				return v;
			});
	// The same with the blocked-worker detector sampling /proc instead of
	// reacting to every context-switch event (cmwq.block_detect): in this
	// shape a worker's short sleeps on a strand's mutex, each one taken for
	// a block, wake the monitor and a second worker on the CPU.
	rs.add("cmwq per-CPU, " + std::to_string(n) + " executors, block_detect=sample", [&] {
		char prev[16] = {};
		cmwq_param_get("cmwq.block_detect", prev, sizeof(prev));
		cmwq_param_set("cmwq.block_detect", "sample");
		double v;
		{
			cmwq::workqueue wq("bench_actor", WQ_PERCPU, 0);
			std::vector<cmwq::asio::executor> exs;
			for (int i = 0; i < n; i++)
				exs.push_back(cmwq::asio::executor(wq).on_cpu(cpus[static_cast<size_t>(i) % cpus.size()]));
			v = actor_rate(exs, o);
			for (auto &ex : exs)
				ex.join();
		}
		cmwq_param_set("cmwq.block_detect", prev);
		return v;
	});
	rs.report(o.repeat);
}

void run_echo(const options &o, int n)
{
	runs rs{"echo", "round trips/s", {}};
	rs.add("asio::io_context on " + std::to_string(n) + " threads", [&] {
		net::io_context ctx(n);
		auto guard = net::make_work_guard(ctx);
		std::vector<std::thread> ts;
		for (int i = 0; i < n; i++)
			ts.emplace_back([&] { ctx.run(); });
		double r = echo_rate(ctx.get_executor(), o);
		guard.reset();
		ctx.stop();
		for (auto &t : ts)
			t.join();
		return r;
	});
	rs.add("asio::thread_pool(" + std::to_string(n) + ")", [&] {
		net::thread_pool pool(static_cast<size_t>(n));
		double r = echo_rate(pool.get_executor(), o);
		pool.stop();
		pool.join();
		return r;
	});
	for (auto &k : kinds)
		rs.add(k.name, [&] {
			cmwq::workqueue wq("bench_echo", k.flags, k.max_active);
			cmwq::asio::executor ex(wq);
			double v = echo_rate(ex, o);
			ex.join(); // the sessions see their clients' EOF before the workqueue goes
			return v;
		});
	// The reactor run by the workqueue's workers (cmwq::asio::reactor):
	// completions run where epoll saw them, no hop. Not on an ordered
	// workqueue (the reactor refuses it).
	for (auto &k : kinds)
		if (!(k.flags & __WQ_ORDERED))
			rs.add(std::string(k.name) + " + reactor", [&] {
				cmwq::workqueue wq("bench_echo_r", k.flags, k.max_active);
				double v;
				{
					cmwq::asio::reactor rx(wq);
					v = echo_rate(rx.get_executor(), o);
					rx.join();
				}
				return v;
			});
	rs.report(o.repeat);
}

} // namespace

int main(int argc, char **argv)
{
	options o;
	CLI::App app{"Asio's kind of programs on cmwq's Asio executor against Asio's own pools"};
	app.add_option("--protocol", o.protocol, "actor, echo or all")->check(CLI::IsMember({"actor", "echo", "all"}));
	app.add_option("--threads", o.threads, "threads of Asio's pools (default: the online CPUs)")->check(CLI::Range(0, 1024));
	app.add_option("--actor-pools", o.actor_pools, "Asio's thread_pool(1)s the actors are spread over")->check(CLI::Range(1, 1024));
	app.add_option("--actors", o.actors, "actors in the ring")->check(CLI::Range(2, 1000000));
	app.add_option("--hops", o.hops, "hops in all")->check(CLI::Range(1L, 1000000000L));
	app.add_option("--tokens", o.tokens, "tokens going round at once (default: one per actor)")->check(CLI::Range(0, 100000));
	app.add_option("--clients", o.clients, "echo clients")->check(CLI::Range(1, 4096));
	app.add_option("--round-trips", o.round_trips, "round trips per client")->check(CLI::Range(1, 100000000));
	app.add_option("--repeat", o.repeat, "rounds: each line runs once a round, the best is printed")->check(CLI::Range(1, 100));
	app.add_option("--only", o.only, "run only the lines whose label contains this text, or ends with it when it ends with $ (the first line of each protocol still runs, for the ratio)");
	CLI11_PARSE(app, argc, argv);
	opts = &o;
	if (o.tokens > o.actors) {
		std::fprintf(stderr, "wq_asio_bench: --tokens (%d) must not exceed --actors (%d)\n", o.tokens, o.actors);
		return 2;
	}
	int n = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
	std::printf("# wq_asio_bench --protocol %s --threads %d --actor-pools %d --actors %d --hops %ld --tokens %d --clients %d "
		    "--round-trips %d --repeat %d (best of %d alternated rounds; ratio to the first line of each protocol; "
		    "in brackets the median over the rounds of each round's ratio)\n",
		    o.protocol.c_str(), n, o.actor_pools, o.actors, o.hops, o.tokens, o.clients, o.round_trips, o.repeat, o.repeat);
	if (o.protocol == "actor" || o.protocol == "all")
		run_actor(o, n);
	if (o.protocol == "echo" || o.protocol == "all")
		run_echo(o, n);
	return 0;
}
