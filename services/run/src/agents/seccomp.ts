/**
 * The seccomp filter of a sandboxed command: a classic BPF program, built here, that refuses the
 * system calls a command has no use for and that widen what a kernel bug or a misconfiguration
 * would give it: namespaces (unshare, setns, clone with a CLONE_NEW* flag), mounting, ptrace and
 * reading other processes' memory, the kernel keyring, bpf, perf events, loading kernel modules
 * or a new kernel, handles to files by inode, userfaultfd, swap, clock and reboot. clone3 answers
 * ENOSYS (its flags are behind a pointer a filter cannot read), so the C library falls back to
 * clone, whose flags it can. A call from another ABI (i386 int 0x80, x32) ends the process.
 *
 * The filter is loaded by Perl (perl-base is part of every Debian system) through prctl, after
 * no_new_privs, right before it execs the command; on an architecture without a table here the
 * command runs without one, and the service says so at start.
 */

const AUDIT_ARCH_X86_64 = 0xc000003e;
const X32_SYSCALL_BIT = 0x40000000;

/** x86_64 numbers of the refused calls. */
const DENIED_X86_64: Record<string, number> = {
  ptrace: 101, syslog: 103, pivot_root: 155, adjtimex: 159, chroot: 161, acct: 163, settimeofday: 164,
  mount: 165, umount2: 166, swapon: 167, swapoff: 168, reboot: 169, iopl: 172, ioperm: 173, init_module: 175,
  delete_module: 176, quotactl: 179, lookup_dcookie: 212, clock_settime: 227, kexec_load: 246, add_key: 248,
  request_key: 249, keyctl: 250, unshare: 272, perf_event_open: 298, name_to_handle_at: 303, open_by_handle_at: 304,
  setns: 308, process_vm_readv: 310, process_vm_writev: 311, finit_module: 313, kexec_file_load: 320, bpf: 321,
  userfaultfd: 323, open_tree: 428, move_mount: 429, fsopen: 430, fsconfig: 431, fsmount: 432, fspick: 433, mount_setattr: 442,
};
const CLONE_X86_64 = 56;
const CLONE3_X86_64 = 435;
/** CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET. */
const CLONE_NEW_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000;

const EPERM = 1;
const ENOSYS = 38;
const RET_ALLOW = 0x7fff0000;
const RET_ERRNO = 0x00050000;
const RET_KILL_PROCESS = 0x80000000;

// Classic BPF opcodes.
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const RET_K = 0x06;
/** Offsets in struct seccomp_data. */
const NR = 0;
const ARCH = 4;
const ARG0_LOW = 16;

/** The names of the calls the filter refuses (for the start log and the tests). */
export const deniedCalls = (): string[] => [...Object.keys(DENIED_X86_64), 'clone with CLONE_NEW*', 'clone3 (ENOSYS)'];

/** The filter for this process's architecture as the bytes of a `struct sock_filter[]`, or undefined where there is no table. */
export function seccompFilter(arch: string = process.arch): Buffer | undefined {
  if (arch !== 'x64') return undefined;
  type Ins = [code: number, jt: number | string, jf: number | string, k: number];
  const denied = Object.values(DENIED_X86_64);
  const prog: Ins[] = [
    [LD_W_ABS, 0, 0, ARCH],
    [JEQ_K, 0, 'kill', AUDIT_ARCH_X86_64],
    [LD_W_ABS, 0, 0, NR],
    [JGE_K, 'eperm', 0, X32_SYSCALL_BIT],
    ...denied.map((nr): Ins => [JEQ_K, 'eperm', 0, nr]),
    [JEQ_K, 'enosys', 0, CLONE3_X86_64],
    [JEQ_K, 0, 'allow', CLONE_X86_64],
    [LD_W_ABS, 0, 0, ARG0_LOW],
    [JSET_K, 'eperm', 'allow', CLONE_NEW_FLAGS],
  ];
  const labels = { allow: prog.length, eperm: prog.length + 1, enosys: prog.length + 2, kill: prog.length + 3 };
  prog.push([RET_K, 0, 0, RET_ALLOW], [RET_K, 0, 0, RET_ERRNO | EPERM], [RET_K, 0, 0, RET_ERRNO | ENOSYS], [RET_K, 0, 0, RET_KILL_PROCESS]);
  const out = Buffer.alloc(prog.length * 8);
  prog.forEach(([code, jt, jf, k], i) => {
    // A jump's offset counts from the next instruction.
    const rel = (j: number | string) => (typeof j === 'number' ? j : labels[j as keyof typeof labels] - i - 1);
    out.writeUInt16LE(code, i * 8);
    out.writeUInt8(rel(jt), i * 8 + 2);
    out.writeUInt8(rel(jf), i * 8 + 3);
    out.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return out;
}

/**
 * A Perl program that loads the filter given in hex as its first argument (prctl PR_SET_SECCOMP,
 * SECCOMP_MODE_FILTER, &struct sock_fprog) and execs bash with the command (second argument).
 * no_new_privs must be set already (setpriv does). Exit 125 when the filter cannot be loaded.
 */
export const SECCOMP_LOADER = `my ($hex, $cmd) = @ARGV; my $prog = pack("H*", $hex);
my $fprog = pack("S x6 P", length($prog) / 8, $prog);
if (syscall(157, 22, 2, $fprog) != 0) { print STDERR "sandbox: the seccomp filter could not be loaded: $!\\n"; exit 125 }
exec { "/bin/bash" } "/bin/bash", "-c", $cmd or exit 127;`;
