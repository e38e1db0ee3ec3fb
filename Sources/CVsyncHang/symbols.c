// Symbol lookup for captured stacks, outside any signal handler. dladdr() names only the
// symbols a module exports, and an executable exports none unless linked with
// --export-dynamic, so a Swift app's own functions would go unnamed. The full symbol table
// (.symtab) of an unstripped module names them all: it is read from the module's file,
// mapped once and kept, the first time a frame falls in that module.
#define _GNU_SOURCE
#include "vsync_hang.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_MODULES 64

typedef struct {
    char path[512];
    const unsigned char *map;  // the whole file, or NULL when it has no .symtab
    size_t size;
    const ElfW(Sym) *symbols;
    size_t count;
    const char *names;
    size_t names_size;
    // The function symbols' indices sorted by address, and the largest function's size: a
    // frame is looked up by binary search, not by a scan of the whole table, which in a slow
    // guest took long enough for the hang to end before its report.
    uint32_t *order;
    size_t order_count;
    ElfW(Xword) max_size;
} module_symbols;

static module_symbols modules[MAX_MODULES];
static int module_count;
static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
    uintptr_t address;
    uintptr_t bias;
    const char *name;
    int found;
} containing_object;

/// Finds the loaded object whose segments hold the address: its file name ("" for the main
/// program) and load bias (what .symtab values are offset by).
static int find_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    containing_object *c = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (c->address >= start && c->address < start + ph->p_memsz) {
            c->bias = info->dlpi_addr;
            c->name = info->dlpi_name;
            c->found = 1;
            return 1;
        }
    }
    return 0;
}

/// A function symbol with a name: the ones a frame can be named after.
static int is_function(const module_symbols *m, const ElfW(Sym) *s) {
    return ELF64_ST_TYPE(s->st_info) == STT_FUNC && s->st_value != 0 && s->st_name < m->names_size;
}

/// By address, then by place in the table (so the first of several aliases wins, as a scan would).
static int by_address(const void *a, const void *b, void *symbols) {
    const ElfW(Sym) *table = symbols;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (table[x].st_value != table[y].st_value) return table[x].st_value < table[y].st_value ? -1 : 1;
    return x < y ? -1 : x > y;
}

/// Sorts the module's function symbols by address (once, when it is loaded). Without memory
/// for it the module is looked up by scanning, as before.
static void index_module(module_symbols *m) {
    size_t n = 0;
    for (size_t i = 0; i < m->count && i <= UINT32_MAX; i++) n += is_function(m, &m->symbols[i]);
    if (n == 0 || (m->order = malloc(n * sizeof *m->order)) == NULL) return;
    for (size_t i = 0; i < m->count && i <= UINT32_MAX; i++) {
        const ElfW(Sym) *s = &m->symbols[i];
        if (!is_function(m, s)) continue;
        m->order[m->order_count++] = (uint32_t)i;
        if (s->st_size > m->max_size) m->max_size = s->st_size;
    }
    qsort_r(m->order, m->order_count, sizeof *m->order, by_address, (void *)m->symbols);
    // The names are read only when a frame is named, during a hang: fault their pages in now,
    // or each name costs a read of the file (slow over a network or 9p file system).
    volatile char sink = 0;
    for (size_t offset = 0; offset < m->names_size; offset += 4096) sink ^= m->names[offset];
    (void)sink;
}

/// Maps `path` and finds its .symtab and the string table it names. A module without one
/// (stripped) is remembered as such, so it is not opened again.
static module_symbols *load_module(const char *path) {
    for (int i = 0; i < module_count; i++) {
        if (strcmp(modules[i].path, path) == 0) return &modules[i];
    }
    if (module_count == MAX_MODULES) return NULL;
    module_symbols *m = &modules[module_count++];
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return m;
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(ElfW(Ehdr))) { close(fd); return m; }
    const unsigned char *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return m;
    size_t size = (size_t)st.st_size;
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)map;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_shoff == 0 ||
        eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) > size) {
        munmap((void *)map, size);
        return m;
    }
    const ElfW(Shdr) *sections = (const ElfW(Shdr) *)(map + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        const ElfW(Shdr) *s = &sections[i];
        if (s->sh_type != SHT_SYMTAB || s->sh_link >= eh->e_shnum) continue;
        const ElfW(Shdr) *strings = &sections[s->sh_link];
        if (s->sh_offset + s->sh_size > size || strings->sh_offset + strings->sh_size > size) break;
        m->map = map;
        m->size = size;
        m->symbols = (const ElfW(Sym) *)(map + s->sh_offset);
        m->count = s->sh_size / sizeof(ElfW(Sym));
        m->names = (const char *)(map + strings->sh_offset);
        m->names_size = strings->sh_size;
        index_module(m);
        return m;
    }
    munmap((void *)map, size);
    return m;
}

/// The function symbol in `m` holding `offset` (an address less the load bias): a sized one
/// that contains it, else the unsized one nearest below it.
static const ElfW(Sym) *lookup(const module_symbols *m, uintptr_t offset) {
    const ElfW(Sym) *best = NULL;
    if (m->order != NULL) {
        // The first symbol above `offset`; then back from there. A sized symbol further below
        // than the largest function's size cannot contain it.
        size_t low = 0, high = m->order_count;
        while (low < high) {
            size_t mid = low + (high - low) / 2;
            if (m->symbols[m->order[mid]].st_value <= offset) low = mid + 1; else high = mid;
        }
        const ElfW(Sym) *sized = NULL;
        for (size_t i = low; i-- > 0;) {
            const ElfW(Sym) *s = &m->symbols[m->order[i]];
            if (sized != NULL && s->st_value != sized->st_value) return sized;  // past its aliases
            int reach = offset - s->st_value < m->max_size;
            if (s->st_size > 0) {
                // Aliases at one address come in table order: the first of them wins.
                if (reach && offset < s->st_value + s->st_size) sized = s;
            } else if (best == NULL) {
                best = s;
            }
            if (!reach && sized == NULL && best != NULL) break;
        }
        return sized != NULL ? sized : best;
    }
    for (size_t i = 0; i < m->count; i++) {
        const ElfW(Sym) *s = &m->symbols[i];
        if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_value == 0 || s->st_name >= m->names_size) continue;
        if (offset < s->st_value) continue;
        if (s->st_size > 0 ? offset < s->st_value + s->st_size : (best == NULL || s->st_value > best->st_value)) {
            if (s->st_size > 0) return s;
            best = s;
        }
    }
    return best;
}

static void copy(char *out, size_t capacity, const char *text) {
    if (capacity == 0) return;
    snprintf(out, capacity, "%s", text ? text : "");
}

int vsync_hang_symbolize(const void *address, char *symbol, size_t symbol_capacity, uintptr_t *symbol_offset,
                         char *module, size_t module_capacity, uintptr_t *module_offset) {
    copy(symbol, symbol_capacity, NULL);
    copy(module, module_capacity, NULL);
    *symbol_offset = 0;
    *module_offset = 0;
    containing_object object = {.address = (uintptr_t)address};
    dl_iterate_phdr(find_object, &object);
    if (!object.found) return -1;
    // The main program's name is empty here; its file is /proc/self/exe whatever argv[0] said.
    const char *path = object.name[0] ? object.name : "/proc/self/exe";
    if (object.name[0]) {
        copy(module, module_capacity, path);
    } else if (module_capacity > 0) {
        ssize_t n = readlink(path, module, module_capacity - 1);
        module[n > 0 ? n : 0] = 0;
    }
    *module_offset = (uintptr_t)address - object.bias;
    // The full table first: dladdr() would name the nearest export for a local function.
    pthread_mutex_lock(&modules_lock);
    int found = 0;
    module_symbols *m = load_module(path);
    if (m != NULL && m->map != NULL) {
        const ElfW(Sym) *s = lookup(m, *module_offset);
        if (s != NULL) {
            copy(symbol, symbol_capacity, m->names + s->st_name);
            *symbol_offset = *module_offset - s->st_value;
            found = 1;
        }
    }
    pthread_mutex_unlock(&modules_lock);
    Dl_info info;
    if (!found && dladdr(address, &info) != 0 && info.dli_sname != NULL && info.dli_saddr != NULL) {
        copy(symbol, symbol_capacity, info.dli_sname);
        *symbol_offset = (uintptr_t)address - (uintptr_t)info.dli_saddr;
        found = 1;
    }
    return found;
}

static int preload_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    // The main program's name is empty here, as in vsync_hang_symbolize. A name with no file
    // (the vDSO's) is remembered as such.
    load_module(info->dlpi_name[0] ? info->dlpi_name : "/proc/self/exe");
    return 0;
}

void vsync_hang_preload_symbols(void) {
    pthread_mutex_lock(&modules_lock);
    dl_iterate_phdr(preload_object, NULL);
    pthread_mutex_unlock(&modules_lock);
}

static int find_main(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    *(uintptr_t *)data = info->dlpi_addr;
    return 1;  // the first object is the main program
}

void *vsync_hang_main_program_symbol(const char *name) {
    uintptr_t bias = 0;
    dl_iterate_phdr(find_main, &bias);
    void *address = NULL;
    pthread_mutex_lock(&modules_lock);
    module_symbols *m = load_module("/proc/self/exe");
    if (m != NULL && m->map != NULL) {
        for (size_t i = 0; i < m->count; i++) {
            const ElfW(Sym) *s = &m->symbols[i];
            if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_value == 0 || s->st_name >= m->names_size) continue;
            if (strcmp(m->names + s->st_name, name) == 0) { address = (void *)(bias + s->st_value); break; }
        }
    }
    pthread_mutex_unlock(&modules_lock);
    return address;
}
