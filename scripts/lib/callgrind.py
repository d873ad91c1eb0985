"""Callgrind harness shared by scripts/bench-report and scripts/instr-report.

Runs a binary under `valgrind --tool=callgrind`, reads the profile it
writes, and turns it into instructions per packet.

A measurement spec is a dict:

  example   the profile example's name (its binary in target/release/examples)
  args/env  its arguments and environment; "{n}" is replaced by the
            iteration count
  func      the function whose inclusive cost is counted (None: the whole
            program)
  n         (n1, n2): two runs, per packet = (Ir(n2) - Ir(n1)) / ((n2 - n1) * unit),
            so that set-up cancels; or None: one run, per packet =
            Ir(func) / (N * unit), N from `n_const` (source file, regex) or
            `count`
  unit      packets per iteration (32 for bursts)
  toggle    collect only inside `func` (`--toggle-collect`), so that shares
            (e.g. AES) are counted inside it alone; one valgrind run per spec
  binary    an explicit binary instead of an example (with `cwd` optional)
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

# Functions that do AES work: the project's AES-NI crate, RustCrypto's `aes`
# (key expansion, and its software fallback when the CPU shows no AES-NI).
AES_RE = re.compile(r"(^|[<\s(&])(aesni|aes)::")
# RustCrypto's constant-time software AES: present only without AES-NI.
SOFT_AES_RE = re.compile(r"(^|[<\s(&])aes::soft::")


def target_dir():
    """Cargo's target directory (CARGO_TARGET_DIR or <workspace>/target)."""
    return Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target").resolve()


def have_valgrind():
    """Whether valgrind is on the PATH."""
    return shutil.which("valgrind") is not None


def valgrind_version():
    """`valgrind --version`, or None."""
    if not have_valgrind():
        return None
    p = subprocess.run(["valgrind", "--version"], text=True, capture_output=True)
    return p.stdout.strip() or None


class Profile:
    """One callgrind profile: total Ir and inclusive Ir per call edge."""

    def __init__(self, total, calls):
        self.total = total
        # (caller, callee) -> inclusive Ir of those calls
        self.calls = calls
        incl = {}
        for (_, callee), v in calls.items():
            incl[callee] = incl.get(callee, 0) + v
        self.incl = incl

    def function(self, func):
        """Inclusive Ir of every call to `func` (a name or its last path segment)."""
        hits = [v for k, v in self.incl.items() if k == func or k.endswith("::" + func)]
        if len(hits) != 1:
            raise RuntimeError(f"function {func}: {len(hits)} matches in the profile")
        return hits[0]

    def share(self, pattern):
        """Inclusive Ir of calls into functions matching `pattern` from
        functions that do not match it (so nested matches count once)."""
        return sum(v for (caller, callee), v in self.calls.items()
                   if pattern.search(callee) and not pattern.search(caller))

    def has(self, pattern):
        """Whether any called function matching `pattern` did work."""
        return any(v > 0 for (_, callee), v in self.calls.items() if pattern.search(callee))


def parse_profile(path):
    """Reads a callgrind output file (name compression included)."""
    names, calls, total = {}, {}, None
    fn, callee, pending = None, None, False
    with open(path) as f:
        for line in f:
            if pending:
                parts = line.split()
                if len(parts) >= 2:
                    key = (fn, callee)
                    calls[key] = calls.get(key, 0) + int(parts[1])
                pending = False
            elif line.startswith(("fn=", "cfn=")):
                key, val = line.rstrip("\n").split("=", 1)
                m = re.match(r"\((\d+)\)(?:\s+(.*))?$", val)
                if m:
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    val = names.get(m.group(1), val)
                if key == "cfn":
                    callee = val
                else:
                    fn = val
            elif line.startswith("calls="):
                pending = True
            elif line.startswith(("totals:", "summary:")):
                total = int(line.split()[1])
    return Profile(total or 0, calls)


def run(binary, args, env, workdir, toggle=None, cwd=None, timeout=None):
    """One valgrind run; returns its Profile. `toggle`: a function name whose
    inclusive cost alone is collected."""
    out = Path(workdir) / "cg.out"
    for old in Path(workdir).glob("cg.out*"):
        old.unlink()
    cmd = ["valgrind", "--tool=callgrind", "--dump-instr=no", f"--callgrind-out-file={out}"]
    if toggle:
        cmd.append(f"--toggle-collect=*::{toggle}")
    cmd += [str(binary)] + list(args)
    p = subprocess.run(cmd, cwd=cwd or ROOT, env=dict(os.environ, **env), text=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout)
    if p.returncode != 0 or not out.exists():
        tail = p.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{' '.join(cmd)} failed: {tail[0]}")
    return parse_profile(out)


def build_examples(examples, logdir, info, warn):
    """Builds the release profile examples {example: package}; returns
    {example: path} for those that built."""
    built = {}
    for ex, pkg in sorted(examples.items()):
        cmd = ["cargo", "build", "--release", "-p", pkg, "--example", ex]
        info(" ".join(cmd))
        log = Path(logdir) / f"build-{ex}.log"
        with open(log, "w") as out:
            p = subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            text = log.read_text(errors="replace")
            first = next((l for l in text.splitlines() if l.startswith("error")), "see the log")
            warn(f"example {ex} does not build ({first.strip()}); log: {log}")
            continue
        built[ex] = target_dir() / "release" / "examples" / ex
    return built


class Runner:
    """Measures specs, running each distinct valgrind invocation once."""

    def __init__(self, binaries, workdir, info):
        self.binaries = binaries
        self.workdir = workdir
        self.info = info
        self.cache = {}

    def _profile(self, spec, n):
        args = [a.replace("{n}", str(n)) for a in spec.get("args", [])]
        env = {k: v.replace("{n}", str(n)) for k, v in spec.get("env", {}).items()}
        toggle = spec["func"] if spec.get("toggle") else None
        binary = spec.get("binary") or self.binaries.get(spec["example"])
        if binary is None:
            raise RuntimeError(f"{spec.get('example')} is not built")
        key = (str(binary), tuple(args), tuple(sorted(env.items())), toggle)
        if key not in self.cache:
            shown = " ".join(f"{k}={v}" for k, v in env.items())
            name = Path(str(binary)).name
            self.info(f"callgrind: {shown + ' ' if shown else ''}{name} {' '.join(args)}"
                      + (f" (inside {toggle})" if toggle else ""))
            self.cache[key] = run(binary, args, env, self.workdir, toggle=toggle,
                                  cwd=spec.get("cwd"), timeout=spec.get("timeout"))
        return self.cache[key]

    def _cost(self, spec, prof):
        if spec.get("toggle") or spec["func"] is None:
            return prof.total
        return prof.function(spec["func"])

    def measure(self, spec):
        """(instructions per packet, AES instructions per packet, software AES seen)."""
        if spec.get("n"):
            n1, n2 = spec["n"]
            p1, p2 = self._profile(spec, n1), self._profile(spec, n2)
            div = (n2 - n1) * spec["unit"]
            value = (self._cost(spec, p2) - self._cost(spec, p1)) / div
            aes = (p2.share(AES_RE) - p1.share(AES_RE)) / div
            soft = p2.has(SOFT_AES_RE)
        else:
            count = spec.get("count")
            if count is None:
                path, pattern = spec["n_const"]
                m = re.search(pattern, (ROOT / path).read_text())
                if not m:
                    raise RuntimeError(f"no iteration count ({pattern}) in {path}")
                count = int(m.group(1).replace("_", ""))
            prof = self._profile(spec, None)
            div = count * spec["unit"]
            value = self._cost(spec, prof) / div
            # Without `toggle` the share covers the whole program (set-up too).
            aes = prof.share(AES_RE) / div if spec.get("toggle") else None
            soft = prof.has(SOFT_AES_RE)
        return value, aes, soft
