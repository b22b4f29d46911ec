#pragma once
// Full-cluster simulations probe hundreds of MiB of hash tables and request state at random;
// on 4 KiB pages nearly every probe also misses the TLB (a two-level page walk under
// virtualisation). glibc's malloc asks the kernel for transparent huge pages when its
// `glibc.malloc.hugetlb=1` tunable is set, but it reads tunables only at start-up, so a
// process that wants them re-executes itself with the tunable added.
namespace myriad::cli {

// When the kernel grants huge pages only on request ("madvise" mode) and the environment
// neither has the tunable nor sets MYRIAD_HUGE_PAGES=0, re-executes /proc/self/exe with the
// same arguments and GLIBC_TUNABLES extended. Returns only when it did not re-execute.
void ReexecWithHugePages(char** argv);

}  // namespace myriad::cli
