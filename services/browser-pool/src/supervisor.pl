# The supervisor of one browser (see supervisor.ts): starts Chromium in a process group of its
# own with its DevTools pipe on fds 3 and 4, and holds that pipe, so the browser outlives the
# pool process. The pool reaches the pipe through a Unix socket (its directory is the pool's
# alone); one connection at a time, a second one is closed at once.
#
# Messages are NUL-terminated JSON. Chromium -> pool: what comes while no pool is connected is
# read and dropped (Chromium never blocks on a full pipe); a new connection starts at the next
# message boundary. Pool -> Chromium: whole commands only (up to the NUL that ends each); a command
# torn by the pool going away is dropped. (Ended with a NUL instead, Chromium 156 answered nothing
# more on the pipe for 20 s and longer.)
#
# Exits when Chromium exits (its group is killed then: no renderer is left); on SIGTERM, or when
# no pool connected within the grace time (0: at once), kills Chromium's group and exits. Perl from perl-base
# (on every Debian): a few MB, where a Node process would take ~40.
# Arguments: <socket path> <grace seconds>; the program and its arguments come on stdin, each
# ended by a NUL (so this process's command line does not read as a browser's).
use strict;
use warnings;
use POSIX qw(WNOHANG EAGAIN EINTR);
use Socket qw(PF_UNIX SOCK_STREAM pack_sockaddr_un);
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);

my ($path, $grace) = @ARGV;
my @cmd = do { local $/; my $in = <STDIN> // ''; split /\0/, $in };
open(STDIN, '<', '/dev/null');
die "usage: supervisor.pl <socket> <grace seconds> < program NUL args NUL...\n" unless defined $path && defined $grace && @cmd;
$SIG{PIPE} = 'IGNORE';
my $stop = 0;
$SIG{TERM} = $SIG{INT} = sub { $stop = 1 };
my $CAP = 1 << 20;    # bytes held per direction before reading from that side pauses
my $MAX_COMMAND = 256 << 20;    # a command longer than this without its NUL: the connection is dropped

pipe(my $cmd_r, my $cmd_w) or die "pipe: $!";    # pool -> Chromium (its fd 3)
pipe(my $out_r, my $out_w) or die "pipe: $!";    # Chromium (its fd 4) -> pool
pipe(my $err_r, my $err_w) or die "pipe: $!";    # Chromium's stderr (the last 4 KB are kept)
socket(my $listen, PF_UNIX, SOCK_STREAM, 0) or die "socket: $!";
unlink $path;
my $umask = umask 077;    # the socket: the pool's uid alone (its directory says so too)
bind($listen, pack_sockaddr_un($path)) or die "bind $path: $!";
umask $umask;
listen($listen, 4) or die "listen: $!";

my $pid = fork() // die "fork: $!";
if ($pid == 0) {
  POSIX::setpgid(0, 0);
  open(STDIN, '<', '/dev/null');
  open(STDOUT, '>', '/dev/null');
  open(STDERR, '>&', $err_w);
  # Our fds above 2 close on exec; the two dup2'd ones do not. Through spare fds first, as the
  # pipes may already sit on 3 or 4.
  my ($a, $b) = (POSIX::dup(fileno $cmd_r), POSIX::dup(fileno $out_w));
  POSIX::dup2($a, 3);
  POSIX::dup2($b, 4);
  POSIX::close($_) for grep { $_ > 4 } $a, $b;
  exec { $cmd[0] } @cmd or POSIX::_exit(127);
}
close $_ for $cmd_r, $out_w, $err_w;
nonblocking($_) for $cmd_w, $out_r, $err_r;
print STDOUT "ready $pid\n";
close STDOUT;

my ($client, $skip) = (undef, 0);
my ($to_client, $to_chrome, $pending, $tail) = ('', '', '', '');
my $boundary = 1;                                   # Chromium's stream is between two messages
# The first connection (the pool that launches it) comes within its launch timeout, whatever the grace.
my $alone_until = time + ($grace > 30 ? $grace : 30);

sub nonblocking { my $fl = fcntl($_[0], F_GETFL, 0); fcntl($_[0], F_SETFL, $fl | O_NONBLOCK) }

sub finish {
  my ($code) = @_;
  kill 'KILL', -$pid;
  waitpid($pid, 0) if $code < 0;
  unlink $path;
  eval { syswrite STDERR, $tail } if length $tail;
  exit($code < 0 ? 0 : $code);
}

sub drop_client {
  close $client;
  $client = undef;
  # A command the pool did not finish never reaches Chromium.
  ($pending, $to_client) = ('', '');
  $alone_until = time + $grace;
}

while (1) {
  finish(-1) if $stop || (!$client && time >= $alone_until);
  my $w = waitpid($pid, WNOHANG);
  finish($? >> 8 || ($? & 127 ? 128 + ($? & 127) : 0)) if $w == $pid;
  my ($rin, $win) = ('', '');
  vec($rin, fileno $listen, 1) = 1;
  vec($rin, fileno $err_r, 1) = 1 if $err_r;
  vec($rin, fileno $out_r, 1) = 1 if $out_r && length($to_client) < $CAP;
  if ($client) {
    vec($rin, fileno $client, 1) = 1 if length($to_chrome) < $CAP;
    vec($win, fileno $client, 1) = 1 if length $to_client;
  }
  vec($win, fileno $cmd_w, 1) = 1 if $cmd_w && length $to_chrome;
  my $n = select(my $r = $rin, my $wr = $win, undef, 0.25);
  next if $n <= 0;

  if ($err_r && vec($r, fileno $err_r, 1)) {
    my $got = sysread($err_r, my $buf, 65536);
    if (defined $got && $got == 0) { close $err_r; $err_r = undef }
    elsif ($got) { $tail = substr($tail . $buf, -4096) }
  }
  if ($out_r && vec($r, fileno $out_r, 1)) {
    my $got = sysread($out_r, my $buf, 65536);
    if (defined $got && $got == 0) { close $out_r; $out_r = undef }    # Chromium is going: waitpid ends us
    elsif ($got) {
      $boundary = substr($buf, -1) eq "\0";
      if ($client) {
        if ($skip) {
          my $at = index($buf, "\0");
          if ($at < 0) { $buf = '' } else { $buf = substr($buf, $at + 1); $skip = 0 }
        }
        $to_client .= $buf;
      }
    }
  }
  # The held connection first: one that just closed makes way for a new one in the same round.
  # Read until it would block, so a close right after the last bytes is seen in this round, before
  # a new connection waiting in the same round is taken for a second one.
  while ($client && vec($r, fileno $client, 1) && length($to_chrome) < $CAP) {
    my $got = sysread($client, my $buf, 65536);
    if (!defined $got) { drop_client() unless $! == EAGAIN || $! == EINTR; last }
    elsif ($got == 0) { drop_client() }
    else {
      $pending .= $buf;
      my $at = rindex($pending, "\0");
      if ($at >= 0) { $to_chrome .= substr($pending, 0, $at + 1); substr($pending, 0, $at + 1) = '' }
      drop_client() if length($pending) > $MAX_COMMAND;
    }
  }
  if (vec($r, fileno $listen, 1)) {
    if (accept(my $c, $listen)) {
      if ($client) { close $c }
      else {
        nonblocking($c);
        ($client, $skip, $pending, $to_client) = ($c, !$boundary, '', '');
      }
    }
  }
  if ($client && length $to_client && vec($wr, fileno $client, 1)) {
    my $put = syswrite($client, $to_client);
    if (defined $put) { substr($to_client, 0, $put) = '' }
    elsif ($! != EAGAIN && $! != EINTR) { drop_client() }
  }
  if ($cmd_w && length $to_chrome && vec($wr, fileno $cmd_w, 1)) {
    my $put = syswrite($cmd_w, $to_chrome);
    if (defined $put) { substr($to_chrome, 0, $put) = '' }
    elsif ($! != EAGAIN && $! != EINTR) { close $cmd_w; $cmd_w = undef; $to_chrome = '' }
  }
}
