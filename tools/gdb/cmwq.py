# cmwq.py - gdb commands for programs that use cmwq.
#
#   (gdb) source /usr/local/share/cmwq/gdb/cmwq.py
#   (gdb) cmwq-current            # the selected thread
#   (gdb) thread apply all cmwq-current
#
# For a cmwq worker thread, prints the workqueue, the running item (its name,
# or its function's symbol), how long it has run, the worker's description
# (set_worker_desc) and the pool (id, CPU or unbound, node, allowed CPUs).
# Reads the library's thread-local worker pointer through debug information,
# so it works on core files too; without debug information it falls back to
# calling cmwq_current_workqueue_name() and current_work() in a live process.
import gdb


def _str(v):
    try:
        return v.string()
    except gdb.error:
        return str(v)


def _std_string(v):
    # libstdc++'s std::string without relying on its pretty printer.
    try:
        return v["_M_dataplus"]["_M_p"].string(length=int(v["_M_string_length"]))
    except gdb.error:
        return str(v)


def _int_vector(v):
    try:
        start, finish = v["_M_impl"]["_M_start"], v["_M_impl"]["_M_finish"]
        return [int((start + i).dereference()) for i in range(int(finish - start))]
    except gdb.error:
        return []


def _cpulist(cpus):
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(out) or "-"


def _symbol(addr):
    try:
        s = gdb.execute("info symbol 0x%x" % int(addr), to_string=True).strip()
        return s.split(" in section")[0] if not s.startswith("No symbol") else "0x%x" % int(addr)
    except gdb.error:
        return "0x%x" % int(addr)


def _eval_cxx(expr):
    # The selected frame may be in C or assembly (a system call): parse as C++.
    lang = gdb.parameter("language")
    gdb.execute("set language c++", to_string=True)
    try:
        return gdb.parse_and_eval(expr)
    finally:
        gdb.execute("set language %s" % lang, to_string=True)


def _from_debug_info():
    w = _eval_cxx("cmwq::detail::tl_worker")
    if int(w) == 0:
        return "not a cmwq worker thread"
    w = w.dereference()
    pool = w["pool"].dereference()
    where = "cpu %d" % int(pool["cpu"]) if int(pool["cpu"]) >= 0 else "unbound"
    if int(pool["node"]) >= 0:
        where += " node %d" % int(pool["node"])
    pool_text = "pool %d (%s, cpus %s)" % (int(pool["id"]), where, _cpulist(_int_vector(pool["cpus"])))
    role = "rescuer" if bool(w["rescuer"]) else "worker"
    if int(w["current_work"]) == 0:
        return "cmwq %s tid %d, idle, %s" % (role, int(w["tid"]), pool_text)
    name = _str(w["current_name"].address.cast(gdb.lookup_type("char").pointer()))
    if not name:
        name = _symbol(w["current_func"])
    wq = _std_string(w["current_pwq"].dereference()["wq"].dereference()["name"])
    desc = _str(w["desc"].address.cast(gdb.lookup_type("char").pointer()))
    text = "cmwq %s tid %d: workqueue %s, item %s (work_struct 0x%x)" % (
        role, int(w["tid"]), wq, name, int(w["current_work"]))
    if desc:
        text += ", desc \"%s\"" % desc
    return text + ", " + pool_text


def _from_calls():
    wq = gdb.parse_and_eval("(const char *)cmwq_current_workqueue_name()")
    if int(wq) == 0:
        return "not running a cmwq work item (no debug information: only items are seen)"
    work = gdb.parse_and_eval("(struct work_struct *)current_work()")
    name = work.dereference()["name"]
    item = _str(name) if int(name) else _symbol(work.dereference()["func"])
    return "cmwq worker: workqueue %s, item %s (work_struct 0x%x); pool unknown without debug information" % (
        _str(wq), item, int(work))


class CmwqCurrent(gdb.Command):
    """Print the cmwq workqueue, work item and pool of the selected thread."""

    def __init__(self):
        super(CmwqCurrent, self).__init__("cmwq-current", gdb.COMMAND_DATA)

    def invoke(self, arg, from_tty):
        try:
            text = _from_debug_info()
        except gdb.error:
            try:
                text = _from_calls()
            except gdb.error as e:
                text = "cmwq: cannot read this thread (%s)" % e
        gdb.write(text + "\n")


CmwqCurrent()
