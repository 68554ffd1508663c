// params.cpp - the parameter registry: the kernel's workqueue.* module
// parameters under their names plus cmwq.* ones, set from CMWQ_PARAMS at
// start and through cmwq_param_set() at run time.
// A table of descriptors (name, parse, format) rather than one function per
// parameter, so listing, the control endpoint and errors share one path.
#include "engine/engine.h"

#include <cmwq/control.h>
#include <cmwq/params.h>

#include <errno.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>

namespace cmwq::detail {

namespace {

bool parse_bool(const std::string &v, bool &out)
{
	if (v == "1" || v == "y" || v == "Y" || v == "true" || v == "on") {
		out = true;
		return true;
	}
	if (v == "0" || v == "n" || v == "N" || v == "false" || v == "off") {
		out = false;
		return true;
	}
	return false;
}

bool parse_ulong(const std::string &v, unsigned long max, unsigned long &out)
{
	if (v.empty() || v[0] == '-')
		return false;
	char *end;
	errno = 0;
	unsigned long x = strtoul(v.c_str(), &end, 0);
	if (errno || *end || x > max)
		return false;
	out = x;
	return true;
}

struct param {
	const char *name;
	const char *accepted; // for error messages
	bool runtime_writable;
	std::function<std::string()> get;
	std::function<int(const std::string &)> set; // 0 or -EINVAL/-EBUSY
};

template <class T>
param uint_param(const char *name, const char *accepted, std::atomic<T> &v, unsigned long max,
		 bool rw = true, unsigned long min_nonzero = 0)
{
	return {name, accepted, rw, [&v] { return std::to_string(v.load()); },
		[&v, max, min_nonzero](const std::string &s) {
			unsigned long x;
			if (!parse_ulong(s, max, x) || (x && x < min_nonzero))
				return -EINVAL;
			v.store(static_cast<T>(x));
			return 0;
		}};
}

param bool_param(const char *name, std::atomic<bool> &v, bool rw = true)
{
	return {name, "Y, N, 1, 0", rw, [&v] { return std::string(v.load() ? "Y" : "N"); },
		[&v](const std::string &s) {
			bool b;
			if (!parse_bool(s, b))
				return -EINVAL;
			v.store(b);
			return 0;
		}};
}

// A fault-injection switch: -1 fails every attempt, N > 0 the next N.
param fail_param(const char *name, std::atomic<long> &v)
{
	return {name, "-1 (fail all), 0 (off) or N > 0 (fail the next N)", true,
		[&v] { return std::to_string(v.load()); },
		[&v](const std::string &s) {
			char *end;
			errno = 0;
			long x = strtol(s.c_str(), &end, 0);
			if (s.empty() || errno || *end || x < -1)
				return -EINVAL;
			v.store(x);
			return 0;
		}};
}

std::vector<param> &table()
{
	static std::vector<param> *t = [] {
		auto &p = params();
		auto *v = new std::vector<param>;
		v->push_back({"workqueue.default_affinity_scope", scope_names_list(false), true,
			      [] { return std::string(scope_name(g().default_scope)); },
			      [](const std::string &s) {
				      auto sc = parse_scope(s);
				      if (!sc || *sc == affinity_scope::dfl)
					      return -EINVAL;
				      if (g().usable.empty()) {
					      g().default_scope = *sc;
					      return 0;
				      }
				      return set_default_scope(*sc);
			      }});
		v->push_back({"workqueue.cache_shard_size", "an integer >= 1 (cores per shard; 0 means 1)", true,
			      [&p] { return std::to_string(p.cache_shard_size.load()); },
			      [&p](const std::string &s) {
				      unsigned long x;
				      if (!parse_ulong(s, 1u << 20, x))
					      return -EINVAL;
				      if (x == 0) {
					      log_printf(LOG_WARNING, "workqueue: cache_shard_size must be > 0, setting to 1\n");
					      x = 1;
				      }
				      if (g().usable.empty()) {
					      p.cache_shard_size.store(static_cast<unsigned>(x));
					      return 0;
				      }
				      int err = set_cache_shard_size(static_cast<unsigned>(x));
				      if (!err)
					      p.cache_shard_size.store(static_cast<unsigned>(x));
				      return err;
			      }});
		v->push_back(bool_param("workqueue.power_efficient", p.power_efficient, false));
		v->push_back(uint_param("workqueue.cpu_intensive_thresh_us", "an integer of microseconds (0 disables)",
					p.cpu_intensive_thresh_us, 1000000000ul));
		v->push_back(uint_param("workqueue.cpu_intensive_warning_thresh", "an integer (0 disables reports)",
					p.cpu_intensive_warning_thresh, 1000000000ul));
		v->push_back(uint_param("workqueue.watchdog_thresh", "an integer of seconds (0 disables)",
					p.watchdog_thresh, 3600ul));
		v->push_back(uint_param("cmwq.timer_callback_warn_us", "an integer of microseconds (0 disables)",
					p.timer_callback_warn_us, 1000000000ul));
		v->push_back(bool_param("workqueue.debug_force_rr_cpu", p.debug_force_rr_cpu));
		v->push_back(bool_param("cmwq.wake_under_lock", p.wake_under_lock));
		v->push_back(bool_param("cmwq.unbound_local_wake", p.unbound_local_wake));
		v->push_back(bool_param("cmwq.warn_migration", p.warn_migration));
		v->push_back(bool_param("cmwq.panic_on_warn", p.panic_on_warn));
		v->push_back({"cmwq.cpu_quota", "an integer of CPUs from 0 (no quota) to 65536", true,
			      [&p] { return std::to_string(p.cpu_quota.load()); },
			      [&p](const std::string &s) {
				      unsigned long x;
				      if (!parse_ulong(s, 65536ul, x))
					      return -EINVAL;
				      p.cpu_quota.store(static_cast<unsigned>(x));
				      p.cpu_quota_set.store(true); // the monitor stops following the cgroups
				      if (g().usable.empty())
					      return 0; // applied at start
				      return set_unbound_concurrency(p.unbound_managed.load());
			      }});
		v->push_back(bool_param("cmwq.unbound_returning_takes", p.unbound_returning_takes));
		v->push_back({"cmwq.debug_objects", "Y, N, 1, 0", true,
			      [] { return std::string(debug_objects_on() ? "Y" : "N"); },
			      [](const std::string &s) {
				      bool b;
				      if (!parse_bool(s, b))
					      return -EINVAL;
				      __atomic_store_n(&cmwq_debug_objects, b ? 1 : 0, __ATOMIC_RELAXED);
				      return 0;
			      }});
		v->push_back(fail_param("cmwq.fail_worker_creation", p.fail_worker_creation));
		v->push_back(fail_param("cmwq.fail_thread_creation", p.fail_thread_creation));
		v->push_back(uint_param("cmwq.idle_spin_ns", "an integer of nanoseconds, at most 1000000 (0: sleep at once)",
					p.idle_spin_ns, 1000000ul));
		v->push_back(uint_param("cmwq.unbound_idle_spin_ns", "an integer of nanoseconds, at most 1000000 (0: sleep at once)",
					p.unbound_idle_spin_ns, 1000000ul));
		v->push_back(uint_param("cmwq.blocked_sample_us", "an integer of microseconds >= 50 (0 disables)",
					p.blocked_sample_us, 1000000ul, true, 50));
		v->push_back(uint_param("cmwq.blocked_window_us", "an integer of microseconds",
					p.blocked_window_us, 10000000ul));
		v->push_back(uint_param("cmwq.block_grace_us", "an integer of microseconds, at most 1000000 (0: at once)",
					p.block_grace_us, 1000000ul));
		v->push_back(uint_param("cmwq.block_event_idle_runs",
					"an integer of busy periods, at most 1000000 (0: never close)",
					p.block_event_idle_runs, 1000000ul));
		v->push_back({"cmwq.block_detect", "auto, perf, sample, off", true,
			      [] { return std::string(block_mode_name(detect_mode())); },
			      [](const std::string &s) {
				      static const char *names[] = {"auto", "perf", "sample", "off"};
				      for (int i = 0; i < 4; i++)
					      if (s == names[i])
						      return detect_set_mode(i);
				      return -EINVAL;
			      }});
		v->push_back(fail_param("cmwq.fail_perf_open", p.fail_perf_open));
		v->push_back(fail_param("cmwq.fail_switch_records", p.fail_switch_records));
		v->push_back({"cmwq.unbound_concurrency", "kernel, managed", true,
			      [&p] { return std::string(p.unbound_managed.load() ? "managed" : "kernel"); },
			      [](const std::string &s) {
				      if (s != "kernel" && s != "managed")
					      return -EINVAL;
				      return set_unbound_concurrency(s == "managed");
			      }});
		v->push_back({"cmwq.idle_timeout_s", "an integer of seconds from 1 to 86400", true,
			      [&p] { return std::to_string(p.idle_timeout_s.load()); },
			      [&p](const std::string &s) {
				      unsigned long x;
				      if (!parse_ulong(s, 86400ul, x) || x == 0)
					      return -EINVAL;
				      p.idle_timeout_s.store(static_cast<unsigned>(x));
				      return 0;
			      }});
		v->push_back({"cmwq.control", "0, 1", true, [&p] { return std::string(p.control.load() ? "1" : "0"); },
			      [&p](const std::string &s) {
				      bool b;
				      if (!parse_bool(s, b))
					      return -EINVAL;
				      if (g().usable.empty()) {
					      p.control.store(b);
					      return 0; // applied at start
				      }
				      if (b) {
					      int err = cmwq_control_start();
					      if (!err)
						      p.control.store(true);
					      return err;
				      }
				      cmwq_control_stop();
				      p.control.store(false);
				      return 0;
			      }});
		return v;
	}();
	return *t;
}

param *find(const char *name)
{
	for (auto &p : table())
		if (strcmp(p.name, name) == 0)
			return &p;
	return nullptr;
}

} // namespace

void params_load_env()
{
	const char *env = getenv("CMWQ_PARAMS");
	if (!env)
		return;
	std::istringstream in(env);
	std::string tok;
	while (in >> tok) {
		auto eq = tok.find('=');
		std::string name = tok.substr(0, eq);
		param *p = find(name.c_str());
		if (!p) {
			log_printf(LOG_WARNING, "cmwq: CMWQ_PARAMS: unknown parameter \"%s\"\n", name.c_str());
			continue;
		}
		if (eq == std::string::npos) {
			log_printf(LOG_WARNING, "cmwq: CMWQ_PARAMS: \"%s\" needs a value (%s=VALUE; accepted: %s)\n",
				name.c_str(), name.c_str(), p->accepted);
			continue;
		}
		std::string val = tok.substr(eq + 1);
		if (p->set(val))
			log_printf(LOG_WARNING, "cmwq: CMWQ_PARAMS: bad value \"%s\" for %s (accepted: %s); keeping %s\n",
				val.c_str(), p->name, p->accepted, p->get().c_str());
	}
}

const char *param_accepted(const char *name)
{
	param *p = find(name);
	return p ? p->accepted : nullptr;
}

} // namespace cmwq::detail

using namespace cmwq::detail;

extern "C" int cmwq_param_set(const char *name, const char *value)
{
	if (!name && null_arg("cmwq_param_set", "name"))
		return -EINVAL;
	ensure_started();
	param *p = find(name);
	if (!p)
		return -ENOENT;
	if (!p->runtime_writable)
		return -EPERM;
	return p->set(value ? value : "");
}

extern "C" int cmwq_param_get(const char *name, char *buf, size_t len)
{
	if (!name && null_arg("cmwq_param_get", "name"))
		return -EINVAL;
	if (!buf && null_arg("cmwq_param_get", "buf"))
		return -EINVAL;
	ensure_started();
	param *p = find(name);
	if (!p)
		return -ENOENT;
	std::string v = p->get();
	if (v.size() + 1 > len)
		return -ERANGE;
	memcpy(buf, v.c_str(), v.size() + 1);
	return 0;
}

extern "C" const char *cmwq_param_name(unsigned int index)
{
	auto &t = table();
	return index < t.size() ? t[index].name : nullptr;
}
