"""Detached child processes with pid files: what outlives the command that started it.

A pid file alone is not trusted: the pid must be alive and its command line must
contain an expected fragment, so a recycled pid never gets signalled by mistake.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from revenue_platform.errors import PrerequisiteError

# Every process `spawn_detached` started, kept so its exit status can still be read (`exit_code`):
# a dropped Popen is reaped by the next Popen anyone creates, and its status is lost.
# Bounded: of the processes that have ended, the newest _KEEP_ENDED stay (a long-lived supervisor
# launches drivers for weeks); a running one always stays.
_SPAWNED: dict[int, subprocess.Popen[bytes]] = {}
_KEEP_ENDED = 64


def _forget_old_ended() -> None:
    ended = [pid for pid, process in _SPAWNED.items() if process.poll() is not None]
    for pid in ended[:-_KEEP_ENDED]:  # the dict keeps launch order: the oldest first
        del _SPAWNED[pid]


def spawn_detached(
    command: list[str],
    pid_path: Path,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start `command` in its own session (so it survives its parent), log to `log_path`, write its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
    pid_path.write_text(str(process.pid))
    _forget_old_ended()
    _SPAWNED[process.pid] = process
    return process.pid


def exit_code(pid: int) -> int | None:
    """How `pid` ended (its exit status; minus the signal that killed it), if this process started it
    with `spawn_detached` and it has ended; None while it runs, or when another process started it
    (its status went to that one), or when it is older than the newest `_KEEP_ENDED` that ended."""
    process = _SPAWNED.get(pid)
    return None if process is None else process.poll()


def rotate_copytruncate(path: Path, max_bytes: int, backups: int) -> bool:
    """Rotate `path` once it exceeds `max_bytes`: copy it to `path.1` (older copies shift to .2 ...
    up to `backups`), then truncate it in place. Returns True when it rotated.

    For logs a detached process holds open with O_APPEND (`spawn_detached`): renaming would leave it
    writing to the renamed file, while a truncated O_APPEND file is simply written from its new end.
    Lines written between the copy and the truncation are lost (as with logrotate's copytruncate).
    """
    try:
        if path.stat().st_size <= max_bytes:
            return False
    except FileNotFoundError:
        return False
    for index in range(backups - 1, 0, -1):
        older = path.with_name(f"{path.name}.{index}")
        if older.exists():
            older.replace(path.with_name(f"{path.name}.{index + 1}"))
    shutil.copyfile(path, path.with_name(f"{path.name}.1"))
    with path.open("r+b") as log:
        log.truncate(0)
    return True


def cmdline(pid: int) -> str:
    """The command line of `pid` ('' when it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def environment(pid: int) -> dict[str, str]:
    """The environment `pid` was started with ({} when it is gone or not ours to read)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if item)
    return {key: value for key, _, value in pairs}


def _state(pid: int) -> str | None:
    """The state letter of `pid` (field 3 of /proc/<pid>/stat); None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def is_alive(pid: int) -> bool:
    """True for a running (non-zombie) process."""
    state = _state(pid)
    return state is not None and state not in _ENDED_STATES


def is_stopped(pid: int) -> bool:
    """True for a process stopped by a signal (SIGSTOP, SIGTSTP, a tty read in the background) or
    held by a debugger: it lives, holds its ports, and answers nothing until SIGCONT."""
    return _state(pid) in _STOPPED_STATES


# A process in the middle of an exec (spark-submit's bash execs spark-class, which execs java) shows
# an empty /proc/<pid>/cmdline for a moment: its new memory has no arguments yet. Read as "not ours",
# that moment made a deploy report a healthy driver as "exited at start" (a busy CI machine, 2026-12-02).
_EXEC_SETTLE_READS = 20
_EXEC_SETTLE_PAUSE_S = 0.05


def runs_command_with(pid: int, fragment: str) -> bool:
    """True when `pid` is alive and its command line holds `fragment` (the process we started, not
    another that got its pid). An empty command line of a live process is an exec in progress: read
    again, for up to a second, before answering."""
    for _ in range(_EXEC_SETTLE_READS):
        if not is_alive(pid):
            return False
        line = cmdline(pid)
        if line:
            return fragment in line
        time.sleep(_EXEC_SETTLE_PAUSE_S)
    return False


def spawned_and_running(pid: int) -> bool | None:
    """Whether `pid`, started by this process with `spawn_detached`, still runs (its own exit status
    says, whatever its command line shows); None when another process started it."""
    process = _SPAWNED.get(pid)
    return None if process is None else process.poll() is None


def read_live_pid(pid_path: Path, expected_cmdline_fragment: str) -> int | None:
    """The pid in `pid_path` if that process is alive and is the one we started."""
    try:
        pid = int(pid_path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if runs_command_with(pid, expected_cmdline_fragment) else None


def group_members(group: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `group`."""
    return _members(_PGRP_FIELD, group)


def session_members(session: int) -> list[int]:
    """Live (non-zombie) processes of session `session`, whatever their process group."""
    return _members(_SESSION_FIELD, session)


# States of /proc/<pid>/stat of a process that has exited: Z (zombie, waits to be reaped), X (dead).
_ENDED_STATES = frozenset({"Z", "X"})

# States of a process stopped by a signal (T) or by a debugger (t).
_STOPPED_STATES = frozenset({"T", "t"})

# Fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, session, ...
_PGRP_FIELD = 2
_SESSION_FIELD = 3


def _members(field: int, value: int) -> list[int]:
    members = []
    for stat_path in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_path.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in _ENDED_STATES and int(fields[field]) == value:
            members.append(int(stat_path.parent.name))
    return members


def terminate(
    pid: int,
    grace_s: float,
    first_signal: signal.Signals = signal.SIGTERM,
    signal_pid: int | None = None,
    whole_session: bool = False,
) -> bool:
    """Ask `pid` to stop with `first_signal`, wait for its whole process group, then SIGKILL leftovers.

    Only the leader (or `signal_pid`, a member that owns the shutdown, e.g. a Python driver under
    its JVM) gets the polite signal: it stops and reaps its own children (a group-wide signal would
    orphan them, and not every init reaps orphans). `whole_session`: wait for and kill every
    process of `pid`'s session instead, also those in process groups of their own (Airflow runs
    each task in one, and a task's spark-submit with it). Returns True if anything had to be
    SIGKILLed.
    """
    try:
        members = (
            functools.partial(session_members, os.getsid(pid))
            if whole_session
            else functools.partial(group_members, os.getpgid(pid))
        )
        os.kill(signal_pid or pid, first_signal)
    except ProcessLookupError:
        return False
    _continue_stopped(members())
    _wait_until_none(members, grace_s, 0.2)
    leftovers = members()
    for leftover in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(leftover, signal.SIGKILL)
    if leftovers:
        # SIGKILL is delivered asynchronously: on a loaded machine a killed process can stay visible
        # (and hold its ports and files) for a moment. Return only once it is gone, or after a bound.
        _wait_until_none(members, _SIGKILL_WAIT_S, 0.05)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return bool(leftovers)


def _continue_stopped(pids: list[int]) -> None:
    """SIGCONT the stopped ones among `pids`: a stopped process (SIGSTOP, a frozen driver) keeps a
    SIGTERM pending and would only go at SIGKILL, after the whole grace period, without its shutdown
    (flushing, removing its pid file). Continued, it handles the pending signal first."""
    for stopped in filter(is_stopped, pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(stopped, signal.SIGCONT)


def _wait_until_none(members: Callable[[], list[int]], seconds: float, poll_s: float) -> None:
    """Poll `members` every `poll_s` until it lists none, for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and members():
        time.sleep(poll_s)


# How long `terminate` waits for SIGKILLed processes to disappear (the kernel normally needs
# milliseconds; a process in uninterruptible I/O on a stalled disk can take longer).
_SIGKILL_WAIT_S = 10.0


def stop_recorded(
    label: str,
    pid: int | None,
    pid_path: Path,
    grace_s: float,
    progress: Callable[[str], None],
    first_signal: signal.Signals = signal.SIGTERM,
) -> None:
    """Stop a local service's process `pid` (read from `pid_path` by the caller; None: not running) with
    `terminate`, remove its pid file and report each step as `[label] ...`."""
    if pid is None:
        progress(f"[{label}] not running")
        pid_path.unlink(missing_ok=True)
        return
    progress(f"[{label}] stopping pid {pid} ...")
    terminate(pid, grace_s, first_signal)
    pid_path.unlink(missing_ok=True)
    progress(f"[{label}] stopped")


@contextlib.contextmanager
def stopped_if_never_ready(spawned: int | None, pid_path: Path) -> Generator[None]:
    """Around the wait for a service this call may have just started (`spawned`; None: one found
    running): if the wait fails, the process it spawned is stopped and its pid file removed, so a
    service that never answered is not left holding its ports. One found running is left alone."""
    try:
        yield
    except BaseException:
        if spawned is not None:
            terminate(spawned, 10.0)
            pid_path.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class StartingService:
    """A local service that was just spawned (or found starting), as `wait_until_answering` polls it."""

    label: str
    """Prefix of progress lines: `[label] ...`."""
    name: str
    """What it is, in a sentence: "the Kafka broker"."""
    log_path: Path
    spawned: int | None
    """The pid this process just started (its child: alive until it exits, whatever its pid file and
    command line say); None: one found already running, whose pid file `recorded_pid` reads."""
    recorded_pid: Callable[[], int | None]


def wait_until_answering(
    service: StartingService,
    answers: Callable[[], bool],
    timeout_s: float,
    progress: Callable[[str], None],
    poll_s: float = 0.5,
) -> float | None:
    """Poll `answers` until True and return the seconds it took, or None after `timeout_s`.

    Reports every 5 s while waiting; raises PrerequisiteError with the log's last lines as soon as the
    process has exited (a start-up failure should not wait out the timeout), and at once, naming
    the fix, when it is stopped (SIGSTOP: it would hold its ports and answer nothing until resumed)."""
    started = time.monotonic()
    last_report = started
    what = f"{service.name[0].upper()}{service.name[1:]}"
    while time.monotonic() - started < timeout_s:
        pid = service.spawned if service.spawned is not None else service.recorded_pid()
        alive = is_alive(service.spawned) if service.spawned is not None else pid is not None
        if not alive:
            raise PrerequisiteError(
                f"{what} exited during start-up. Last lines of "
                f"{service.log_path}:\n{tail(service.log_path, 25)}"
            )
        if pid is not None and is_stopped(pid):
            raise PrerequisiteError(
                f"{what} (pid {pid}) is stopped (SIGSTOP, or held by a debugger), so it answers nothing "
                f"and keeps its ports: resume it with `kill -CONT {pid}`, or end it with `kill {pid}` "
                "and start again."
            )
        if answers():
            return time.monotonic() - started
        if time.monotonic() - last_report >= 5:
            elapsed = time.monotonic() - started
            progress(f"[{service.label}] waiting for {service.name} to answer ({elapsed:.0f}s) ...")
            last_report = time.monotonic()
        time.sleep(poll_s)
    return None


def tail(path: Path, lines: int) -> str:
    """The last `lines` lines of a text file ('' when it does not exist)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# /proc/net/tcp{,6} state of a listening socket.
_TCP_LISTEN = "0A"


@dataclass(frozen=True)
class ListeningSocket:
    """A TCP socket in LISTEN state (or a bound UDP socket) and the process holding it."""

    pid: int
    address: str
    port: int

    @property
    def loopback_only(self) -> bool:
        """True when only this machine can connect (127.0.0.0/8 or ::1, IPv4-mapped included)."""
        address = ipaddress.ip_address(self.address)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return address.is_loopback


def proc_net_address(hex_address: str) -> tuple[str, int]:
    """`0100007F:1F90` (a /proc/net/tcp local address) -> ('127.0.0.1', 8080); IPv6 alike.

    The kernel prints the address as 32-bit words in host (little-endian) byte order.
    """
    hex_ip, hex_port = hex_address.split(":")
    raw = bytes.fromhex(hex_ip)
    ordered = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(ordered)), int(hex_port, 16)


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return inodes
    for fd in fds:
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def listening_sockets(pids: Iterable[int], protocol: str = "tcp") -> list[ListeningSocket]:
    """The sockets the processes `pids` can be reached on (read from /proc; our own processes only):
    TCP sockets in LISTEN state, or with `protocol="udp"` every bound UDP socket (a UDP socket that
    has sent from an unbound address receives on a port of every interface too)."""
    pids = list(pids)
    owner = {inode: pid for pid in pids for inode in _socket_inodes(pid)}
    found = []
    for table in (f"/proc/net/{protocol}", f"/proc/net/{protocol}6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if (protocol == "udp" or fields[3] == _TCP_LISTEN) and fields[9] in owner:
                address, port = proc_net_address(fields[1])
                found.append(ListeningSocket(owner[fields[9]], address, port))
    return sorted(found, key=lambda s: (s.port, s.address, s.pid))
