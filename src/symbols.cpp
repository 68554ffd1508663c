// symbols.cpp - names for code addresses that the dynamic symbol table
// leaves unnamed: static functions, and every function of a program linked
// without -rdynamic. Reports (hogs, slow timers, debug objects, dumps) name
// a function from the ELF symbol table (.symtab) of the object it lives in,
// read once per object; without one, as the object and the offset that
// `addr2line -e OBJECT OFFSET` takes.
#include "engine/engine.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>

namespace cmwq::detail {
namespace {

struct elf_func {
	uint64_t start, size; // st_value and st_size, as in the file
	std::string name;
};

struct symbol_cache {
	mutex lock; // a leaf: file reads under it, once per object
	std::map<std::string, std::vector<elf_func>> objects GUARDED_BY(lock);
};

symbol_cache &cache()
{
	static symbol_cache *c = new symbol_cache;
	return *c;
}

// Objects read at most (each costs its function table), and the largest
// file read: a program is not slowed by a report about a huge object.
constexpr size_t MAX_OBJECTS = 64;
constexpr off_t MAX_OBJECT_BYTES = off_t{512} << 20;

// The STT_FUNC symbols of the file's .symtab, sorted; empty if it has none.
std::vector<elf_func> read_functions(const std::string &path)
{
	std::vector<elf_func> out;
	void *map = MAP_FAILED;
	size_t len = 0;
	// Opened in the library's spare slot (fds.cpp), mapped, and closed.
	with_spare_fd([&] { return open(path.c_str(), O_RDONLY | O_CLOEXEC); },
		      [&](int fd) {
			      struct stat st;
			      if (fstat(fd, &st) || st.st_size < static_cast<off_t>(sizeof(ElfW(Ehdr))) ||
				  st.st_size > MAX_OBJECT_BYTES)
				      return;
			      len = static_cast<size_t>(st.st_size);
			      map = mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
		      },
		      false);
	if (map == MAP_FAILED)
		return out;
	const char *base = static_cast<const char *>(map);
	auto in = [&](uint64_t off, uint64_t n) { return off <= len && n <= len - off; };
	const auto *eh = reinterpret_cast<const ElfW(Ehdr) *>(base);
	if (!memcmp(eh->e_ident, ELFMAG, SELFMAG) && eh->e_ident[EI_CLASS] == (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) &&
	    eh->e_shentsize == sizeof(ElfW(Shdr)) && in(eh->e_shoff, uint64_t{eh->e_shnum} * sizeof(ElfW(Shdr)))) {
		const auto *sh = reinterpret_cast<const ElfW(Shdr) *>(base + eh->e_shoff);
		for (unsigned i = 0; i < eh->e_shnum; i++) {
			if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum ||
			    sh[i].sh_entsize != sizeof(ElfW(Sym)) || !in(sh[i].sh_offset, sh[i].sh_size))
				continue;
			const ElfW(Shdr) &strs = sh[sh[i].sh_link];
			if (!in(strs.sh_offset, strs.sh_size))
				continue;
			const auto *sym = reinterpret_cast<const ElfW(Sym) *>(base + sh[i].sh_offset);
			size_t n = sh[i].sh_size / sizeof(ElfW(Sym));
			for (size_t k = 0; k < n; k++) {
				if ((sym[k].st_info & 0xf) != STT_FUNC || !sym[k].st_value ||
				    sym[k].st_name >= strs.sh_size)
					continue;
				const char *name = base + strs.sh_offset + sym[k].st_name;
				size_t max = static_cast<size_t>(strs.sh_size - sym[k].st_name);
				out.push_back({sym[k].st_value, sym[k].st_size, std::string(name, strnlen(name, max))});
			}
		}
	}
	munmap(map, len);
	std::sort(out.begin(), out.end(), [](const elf_func &a, const elf_func &b) { return a.start < b.start; });
	return out;
}

std::string demangled(const std::string &name)
{
	int st = 0;
	char *dm = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &st);
	if (!dm)
		return name;
	std::string s(dm);
	free(dm);
	return s;
}

} // namespace

std::string code_address_name(const void *addr)
{
	Dl_info info;
	if (!addr || !dladdr(addr, &info) || !info.dli_fbase)
		return {};
	// The main program's dli_fname is how it was started; /proc/self/exe
	// is the file itself.
	void *self = dlopen(nullptr, RTLD_NOW | RTLD_NOLOAD);
	link_map *lm = nullptr;
	bool main_program = self && !dlinfo(self, RTLD_DI_LINKMAP, &lm) && lm &&
			    reinterpret_cast<void *>(lm->l_addr) == info.dli_fbase;
	if (self)
		dlclose(self);
	std::string path = main_program || !info.dli_fname || !*info.dli_fname ? "/proc/self/exe" : info.dli_fname;
	const auto *eh = static_cast<const ElfW(Ehdr) *>(info.dli_fbase);
	uintptr_t a = reinterpret_cast<uintptr_t>(addr);
	// Symbol values are offsets from the load address in a shared object
	// or position-independent program, absolute in a fixed-address one.
	uint64_t key = eh->e_type == ET_EXEC ? a : a - reinterpret_cast<uintptr_t>(info.dli_fbase);
	std::string found;
	uint64_t within = 0;
	{
		auto &c = cache();
		lock_guard lk(c.lock);
		auto it = c.objects.find(path);
		if (it == c.objects.end() && c.objects.size() < MAX_OBJECTS)
			it = c.objects.emplace(path, read_functions(path)).first;
		if (it != c.objects.end()) {
			const auto &fns = it->second;
			auto f = std::upper_bound(fns.begin(), fns.end(), key,
						  [](uint64_t k, const elf_func &e) { return k < e.start; });
			if (f != fns.begin()) {
				--f;
				if (key < f->start + std::max<uint64_t>(f->size, 1)) {
					found = f->name;
					within = key - f->start;
				}
			}
		}
	}
	const char *object = info.dli_fname && *info.dli_fname ? info.dli_fname : path.c_str();
	char buf[64];
	if (!found.empty()) {
		std::string s = demangled(found);
		if (within) {
			snprintf(buf, sizeof(buf), "+0x%llx", static_cast<unsigned long long>(within));
			s += buf;
		}
		return s;
	}
	snprintf(buf, sizeof(buf), "+0x%llx", static_cast<unsigned long long>(key));
	return std::string(object) + buf;
}

void symbol_fork_lock() NO_THREAD_SAFETY_ANALYSIS
{
	cache().lock.lock();
}

void symbol_fork_unlock() NO_THREAD_SAFETY_ANALYSIS
{
	cache().lock.unlock();
}

} // namespace cmwq::detail
