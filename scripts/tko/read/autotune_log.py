"""THE parser of autotune logs, in every format this bundle meets.

Formats, detected per line (one file may mix them, e.g. a ``log_profile.txt``):

* ``autotune_event/1`` JSON Lines written by ``autotune_capture_patch.py``
  (contract: ``references/json_contracts.md``);
* Triton's ``TRITON_PRINT_AUTOTUNING=1`` messages: the 3.0-3.3 one-line form
  ``Triton autotuning for function F finished after Ts; best config selected: C;``,
  the 3.4+ four-line form (``..., with key as K,`` / ``finished after Ts,`` /
  ``best config selected: C;``) and 3.3+ ``Autotuning kernel F with config C``;
* Inductor's ``kernel_autotune`` metric table CSV (torch 2.11+,
  ``TORCHINDUCTOR_ENABLED_METRIC_TABLES=kernel_autotune``);
* ``TORCH_LOGS="+inductor"`` debug lines of ``triton_heuristics`` and
  ``coordinate_descent_tuner`` (with or without the torch log prefix).

A line that carries one of these formats but cannot be read whole (a truncated
JSON line, a config cut in half) is recorded in ``skipped`` and ignored; any
other text is ordinary log noise.  Nothing here imports torch or triton.
"""


from __future__ import annotations

import contextlib
import csv
import gc
import re
from pathlib import Path
from typing import Any, Iterable

from ..base.config import (TEXT_FIELD)
from ..base.errors import InputError
from ..base import inputs

FMT_EVENTS = "autotune_event"
FMT_TRITON = "triton_print_autotuning"
FMT_CSV = "kernel_autotune_csv"
FMT_DEBUG = "inductor_debug_log"

# torch logging prefix: "[rank0]:V1130 03:12:45.123000 4242 torch/_inductor/x.py:12] [0/0] msg"
_TORCH_PREFIX = re.compile(
    r"^(?:\[rank\d+\]:)?[VDIWEC]\d{4} \d\d:\d\d:\d\d\.\d+ +(?P<pid>\d+) "
    r"(?P<site>[^\s\]]+:\d+)\] (?:\[[^\]]*\] )*(?P<msg>.*)$")
_NUM = r"(?:[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan))"
_TIMING_TAIL = re.compile(
    rf"^(?P<cfg>.*): (?P<ms>{_NUM}), nreg (?P<nreg>-?\d+|None), nspill (?P<nspill>-?\d+|None), "
    r"#shared-mem (?P<shared>-?\d+|None)\s*$")
_GETS = re.compile(r"^CachingAutotuner gets (?P<n>\d+) configs for (?P<name>\S+)\s*$")
_BENCH_ALL = re.compile(r"^Benchmark all input configs for (?P<name>\S+), get:\s*$")
_BEST = re.compile(r"^Best config for (?P<name>\S+?): (?P<rest>.*)$")
_COORDESC = re.compile(r"^COORDESC: (?P<rest>.*)$")
_CD_START = re.compile(r"^= Do coordinate descent tuning for (?P<name>\S+) =\s*$")
_CD_BASE = re.compile(rf"^(?P<name>\S+): Baseline Config (?P<cfg>.*), baseline timing (?P<ms>{_NUM})\s*$")
_CD_IMPROVE = re.compile(
    rf"^(?P<name>\S+): Improve from (?P<a>.*) (?P<ta>{_NUM}) -> (?P<b>.*) (?P<tb>{_NUM}), "
    rf"(?P<ratio>{_NUM})x\s*$")
_TRITON_ONE = re.compile(
    r"Triton autotuning for function (?P<name>\S+) finished after (?P<t>[\d.]+)s; "
    r"best config selected: (?P<cfg>.*);\s*$")
_TRITON_HEAD = re.compile(r"Triton autotuning for function (?P<name>\S+),\s*$")
_TRITON_KEY = re.compile(r"^with key as (?P<key>.*),\s*$")
_TRITON_TIME = re.compile(r"^finished after (?P<t>[\d.]+)s,\s*$")
_TRITON_BEST = re.compile(r"^best config selected: (?P<cfg>.*);\s*$")
_TRITON_TRY = re.compile(r"Autotuning kernel (?P<name>\S+) with config (?P<cfg>.*?)\s*$")
_TRITON_FAIL = re.compile(r"^Autotuning failed with (?P<err>.*)$")
_CSV_COLUMNS = ["kernel_path", "kernel_name", "triton_config", "latency_ms"]
# Text that only these formats print: a line holding one but matching no rule is garbled.
_ANCHORS = ("Benchmark all input configs", "nspill", "#shared-mem", "COORDESC",
            "Triton autotuning for function", "CachingAutotuner gets", "Best config for")
_TUNER_SITES = ("triton_heuristics.py", "coordinate_descent_tuner.py")
from .autotune_records import (KernelFacts, ParsedLogs, Timing, Tuning, _event_config, _int, _ms, _same_config, config_key, config_label, parse_config_str)
from .autotune_events import (_arg_saved, _event_basis, _event_timing, decode_event)

class _FileParser:
    def __init__(self, path: Path, out: ParsedLogs):
        self.path = path
        self.out = out
        self.facts = out.facts
        self.prefix = f"{path}:"  # of where(): str(path) is a Python call each time
        self.formats: dict[str, int] = {}
        self.records = 0
        self.overlong = 0  # lines past inputs.MAX_LINE_BYTES, skipped unread
        # per-pid text context (several processes may write one log)
        self.open_bench: dict[Any, Tuning] = {}
        self.declaring: dict[Any, tuple[str, int]] = {}
        self.coordesc: dict[Any, Tuning] = {}
        self.last_kernel: dict[Any, str] = {}
        self.triton_tries: dict[str, Tuning] = {}
        self.last_try: Tuning | None = None
        self.triton_block: dict | None = None
        self.csv_header: list[str] | None = None
        self.csv_group: Tuning | None = None
        self.csv_group_key: tuple | None = None

    # -- bookkeeping
    def where(self, lineno: int) -> str:
        return f"{self.prefix}{lineno}"

    def skip(self, lineno: int, reason: str) -> None:
        self.out.skipped.append({"where": self.where(lineno), "reason": reason})

    def seen(self, fmt: str) -> None:
        self.formats[fmt] = self.formats.get(fmt, 0) + 1
        self.records += 1

    def add_tuning(self, tuning: Tuning) -> Tuning:
        self.out.tunings.append(tuning)
        return tuning

    # -- driver
    def parse(self, lines: Iterable[str]) -> None:
        """``lines``: the file split at "\\n" only (not splitlines(): form feeds etc. must not
        shift line numbers), with or without the "\\n"."""
        for lineno, raw in enumerate(lines, 1):
            line = raw.rstrip("\n").rstrip("\r")
            if not line and type(raw) is inputs.OverlongLine:
                self.overlong += 1
                self.skip(lineno, f"a line of {raw.length} bytes, over the {inputs.MAX_LINE_BYTES}-byte "
                                  "line cap: skipped unread")
                continue
            if self.triton_block is not None and self._triton_block_line(lineno, line):
                continue
            if self.csv_header is not None:
                if self._csv_line(lineno, line):
                    continue
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):  # blank, or a comment / fixture header
                continue
            if stripped.startswith("{") and (self.formats.get(FMT_EVENTS)
                                             or '"schema"' in stripped[:200]
                                             or '"event"' in stripped[:200]):
                try:
                    self._json_line(lineno, stripped)
                except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
                    self.skip(lineno, f"autotune_event line with unreadable fields ({exc})")
                continue
            if self._csv_header_line(stripped):
                continue
            self._text_line(lineno, line)
        if self.triton_block is not None:
            self.skip(self.triton_block["lineno"],
                      "multi-line Triton autotuning message cut off at end of file")
            self.triton_block = None
        self.csv_group = None

    # -- autotune_event/1 JSON Lines
    def _json_line(self, lineno: int, text: str) -> None:
        event, problem = decode_event(text)
        if problem:
            self.skip(lineno, problem)
            return
        get = event.get  # the fields are checked: each is absent, None or of its type
        kernel, kind = event["kernel"], event["event"]
        formats = self.formats  # self.seen(FMT_EVENTS) and self.out.fact(kernel), inline
        formats[FMT_EVENTS] = formats.get(FMT_EVENTS, 0) + 1
        self.records += 1
        fact = self.facts.get(kernel)
        if fact is None:
            fact = self.facts[kernel] = KernelFacts()
        source = get("source_file")
        if source and source not in fact.source_files:  # add_source of a checked str or None
            fact.source_files.append(source)
        standalone = get("standalone_file")
        if isinstance(standalone, str):
            fact.standalone_file = fact.standalone_file or standalone
            if standalone not in fact.standalone_files:
                fact.standalone_files.append(standalone)
        if isinstance(get("device"), dict):
            fact.device = event["device"]
        if isinstance(get("kind"), str):
            fact.kind = event["kind"]
        if get("from_cache") is True or kind == "cache_hit":
            fact.from_cache = True
        configs = get("configs")
        if isinstance(configs, list):
            fact.configs = list(map(_event_config, configs))  # checked on decoding
            fact.declared_configs = len(configs)
        if isinstance(get("num_bytes"), (int, float)) and fact.num_bytes is None:
            fact.num_bytes = int(event["num_bytes"])
            fact.bytes_source = get("bytes_source")
        meta = get("inductor_meta")
        if meta and isinstance(meta.get("kernel_num_gb"), (int, float)) and fact.num_bytes is None:
            fact.num_bytes = int(meta["kernel_num_gb"] * 1e9)
            fact.bytes_source = "kernel_num_gb"
        args = get("args")
        if args is not None:
            self._event_args(lineno, event, kind, args, fact)
        if kind == "note" and isinstance(get("message"), str):
            fact.notes.append(event["message"])
        if kind in ("autotune", "coordesc"):
            self._event_tuning(lineno, event, kernel, kind)

    def _event_args(self, lineno: int, event: dict, kind: str, args: list,
                    fact: KernelFacts) -> None:
        """A launch's arguments: the first launch per signature and the saved input files."""
        if kind == "launch":
            fact.launches.append({"args": args, "grid": event.get("grid"),
                                  "num_bytes": event.get("num_bytes"),
                                  "bytes_source": event.get("bytes_source"),
                                  "standalone_file": event.get("standalone_file"),
                                  "origin": self.where(lineno)})
            site = event.get("launch_site")  # a plain @triton.jit launch: where the program launches it
            if isinstance(site, dict) and isinstance(site.get("file"), str):
                fact.launches[-1]["launch_site"] = {"file": site["file"], "line": site.get("line"),
                                                    "function": site.get("function")}
        saved_inputs = fact.saved_inputs
        for saved in map(_arg_saved, args):  # each arg an object (checked on decoding)
            if saved is not None and isinstance(saved, str) and saved not in saved_inputs:
                saved_inputs.append(saved)

    def _event_tuning(self, lineno: int, event: dict, kernel: str, kind: str) -> None:
        """An ``autotune`` or ``coordesc`` event: its timings and winner as one Tuning."""
        timings = event.get("timings")
        if not isinstance(timings, list):
            self.skip(lineno, f"{kind} event without a 'timings' list")
            return
        statistic = event.get("statistic")
        tuning = Tuning(kernel=kernel, origin=self.where(lineno), fmt=FMT_EVENTS, phase=kind,
                        pid=_int(event.get("pid")), statistic=str(statistic or "unknown"),
                        statistic_basis=_event_basis(event.get("benchmarker"))
                        if statistic else "not recorded")
        rows = tuning.timings
        for item in timings:
            timing = _event_timing(item)
            if timing is None:
                self.skip(lineno, f"{kind} event: a timing without a readable config")
            else:
                rows.append(timing)
        winner = _event_config(event["winner"]) if event.get("winner") is not None else None
        if winner:
            tuning.winner = winner
            tuning.winner_ms = next((t.ms for t in rows if _same_config(t.config, winner)), None)
        self.add_tuning(tuning)

    # -- kernel_autotune metric table CSV
    def _csv_header_line(self, text: str) -> bool:
        cells = [c.strip() for c in text.split(",")]
        if cells == _CSV_COLUMNS or cells == ["model_name"] + _CSV_COLUMNS:
            self.csv_header = cells
            self.csv_group = None
            return True
        return False

    def _csv_line(self, lineno: int, line: str) -> bool:
        """Consume a metric-table row; False hands the line back to the text rules."""
        if not line.strip():
            return True
        if self._csv_header_line(line.strip()):
            return True
        try:
            cells = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            cells = []
        header = self.csv_header or []
        if len(cells) != len(header):
            # a row cut short still starts like a row of this table
            if line.count(",") >= 1 and ("num_warps" in line or line.startswith(("\"", ","))
                                         or "/" in line.split(",")[0]):
                self.skip(lineno, f"metric table row with {len(cells)} of {len(header)} columns")
                return True
            self.csv_header = None
            self.csv_group = None
            return False
        row = dict(zip(header, cells))
        cfg = parse_config_str(row["triton_config"])
        if cfg is None:
            self.skip(lineno, "metric table row with an unreadable triton_config")
            return True
        latency = row["latency_ms"].strip()
        ms = _ms(latency)
        if ms is None and latency not in ("inf", "nan", ""):
            self.skip(lineno, f"metric table row with latency_ms {latency!r}")
            return True
        self.seen(FMT_CSV)
        kernel = row["kernel_name"]
        group_key = (row["kernel_path"], kernel)
        tuning = self.csv_group
        if tuning is None or self.csv_group_key != group_key or any(
                config_key(t.config) == config_key(cfg) for t in tuning.timings):
            # one benchmark_all_configs call writes its rows together; a new kernel or a
            # repeated config starts the next one
            tuning = self.add_tuning(Tuning(
                kernel=kernel, origin=self.where(lineno), fmt=FMT_CSV, statistic="min",
                statistic_basis="inferred: the kernel_autotune table exists from torch 2.11, whose "
                                "default benchmarker returns the minimum"))
            self.csv_group, self.csv_group_key = tuning, group_key
        tuning.timings.append(Timing(cfg, ms))
        self.out.fact(kernel).add_source(row["kernel_path"])
        return True

    # -- Triton TRITON_PRINT_AUTOTUNING, 3.4+ four-line block
    def _triton_block_line(self, lineno: int, line: str) -> bool:
        block = self.triton_block
        text = line.strip()
        step = block["step"]
        m = None
        if step == 0:
            m = _TRITON_KEY.match(text)
            if m:
                block["key"] = m.group("key")
        elif step == 1:
            m = _TRITON_TIME.match(text)
            if m:
                block["t"] = float(m.group("t"))
        elif step == 2:
            m = _TRITON_BEST.match(text)
            if m:
                cfg = parse_config_str(m.group("cfg"))
                if cfg is None:
                    self.triton_block = None
                    self.skip(block["lineno"], "Triton autotuning message with an unreadable "
                                               "best config")
                    return True
                self._triton_done(block["lineno"], block["name"], block["t"], cfg, block["key"])
                self.triton_block = None
                return True
        if m is None:
            self.triton_block = None
            self.skip(block["lineno"], "multi-line Triton autotuning message cut off "
                                       f"(line {lineno} does not continue it)")
            return False
        block["step"] = step + 1
        return True

    def _triton_done(self, lineno: int, name: str, seconds: float, cfg: dict,
                     key: str | None) -> None:
        self.seen(FMT_TRITON)
        tuning = self.triton_tries.pop(name, None)
        if tuning is None:
            tuning = self.add_tuning(Tuning(kernel=name, origin=self.where(lineno), fmt=FMT_TRITON))
        tuning.statistic = "median"
        tuning.statistic_basis = "Triton Autotuner: do_bench quantiles (0.5, 0.2, 0.8), compared " \
                                 "by median; times are not printed"
        tuning.duration_s = seconds
        tuning.winner = cfg
        if key is not None:
            self.out.fact(name).notes.append(f"tuned for key {key}")
        self.out.fact(name).kind = self.out.fact(name).kind or "triton_autotune"

    # -- plain text lines: the patterns of _TEXT_RULES (below the handlers) are tried in order;
    # the first that matches and whose handler does not return False takes the line
    def _text_line(self, lineno: int, line: str) -> None:
        m = _TORCH_PREFIX.match(line)
        pid = _int(m.group("pid")) if m else None
        msg = (m.group("msg") if m else line).strip()
        for find, handle in self._TEXT_RULES:
            t = find(msg)
            if t is not None and handle(self, lineno, pid, t) is not False:
                return
        self._text_rest(lineno, m, pid, msg)

    def _on_triton_one(self, lineno: int, pid: Any, t: re.Match) -> None:
        cfg = parse_config_str(t.group("cfg"))
        if cfg is None:
            self.skip(lineno, "Triton autotuning message with an unreadable best config")
        else:
            self._triton_done(lineno, t.group("name"), float(t.group("t")), cfg, None)

    def _on_triton_head(self, lineno: int, pid: Any, t: re.Match) -> None:
        self.triton_block = {"lineno": lineno, "name": t.group("name"), "step": 0,
                             "key": None, "t": None}

    def _on_triton_try(self, lineno: int, pid: Any, t: re.Match) -> None:
        cfg = parse_config_str(t.group("cfg"))
        if cfg is None:
            self.skip(lineno, "'Autotuning kernel ... with config' line with an unreadable config")
            return
        name = t.group("name")
        tuning = self.triton_tries.get(name)
        if tuning is None or any(config_key(x.config) == config_key(cfg) for x in tuning.timings):
            tuning = self.add_tuning(Tuning(kernel=name, origin=self.where(lineno), fmt=FMT_TRITON))
            self.triton_tries[name] = tuning
        tuning.timings.append(Timing(cfg, None))
        self.last_try = tuning
        self.seen(FMT_TRITON)

    def _on_triton_fail(self, lineno: int, pid: Any, t: re.Match) -> bool | None:
        if self.last_try is None:
            return False
        self.out.fact(self.last_try.kernel).notes.append(
            f"config {config_label(self.last_try.timings[-1].config)} failed: {t.group('err')}")
        return None

    def _on_gets(self, lineno: int, pid: Any, t: re.Match) -> None:
        name, n = t.group("name"), int(t.group("n"))
        fact = self.out.fact(name)
        fact.declared_configs = n
        fact.configs = []
        self.declaring[pid] = (name, n)
        self.open_bench.pop(pid, None)
        self.seen(FMT_DEBUG)

    def _on_bench_all(self, lineno: int, pid: Any, t: re.Match) -> None:
        self.declaring.pop(pid, None)
        self.open_bench[pid] = self.add_tuning(Tuning(
            kernel=t.group("name"), origin=self.where(lineno), fmt=FMT_DEBUG, pid=pid))
        self.last_kernel[pid] = t.group("name")
        self.seen(FMT_DEBUG)

    def _on_best(self, lineno: int, pid: Any, t: re.Match) -> None:
        self.declaring.pop(pid, None)
        self.open_bench.pop(pid, None)
        self._best_line(lineno, pid, t.group("name"), t.group("rest"))

    def _on_cd_start(self, lineno: int, pid: Any, t: re.Match) -> None:
        self.coordesc[pid] = self.add_tuning(Tuning(
            kernel=t.group("name"), origin=self.where(lineno), fmt=FMT_DEBUG, phase="coordesc",
            pid=pid))
        self.seen(FMT_DEBUG)

    def _on_cd_base(self, lineno: int, pid: Any, t: re.Match) -> None:
        cfg = parse_config_str(t.group("cfg"))
        tuning = self._coordesc_for(pid, t.group("name"), lineno)
        if cfg is not None and not any(config_key(x.config) == config_key(cfg)
                                       for x in tuning.timings):
            tuning.timings.append(Timing(cfg, _ms(t.group("ms"))))
        self.seen(FMT_DEBUG)

    def _on_cd_improve(self, lineno: int, pid: Any, t: re.Match) -> None:
        cfg = parse_config_str(t.group("b"))
        tuning = self._coordesc_for(pid, t.group("name"), lineno)
        if cfg is None:
            self.skip(lineno, "coordinate descent result with an unreadable config")
            return
        tuning.winner, tuning.winner_ms = cfg, _ms(t.group("tb"))
        self.coordesc.pop(pid, None)
        self.seen(FMT_DEBUG)

    def _on_coordesc(self, lineno: int, pid: Any, t: re.Match) -> None:
        self._coordesc_probe(lineno, pid, t.group("rest"))

    _TEXT_RULES = (
        (_TRITON_ONE.search, _on_triton_one),
        (_TRITON_HEAD.search, _on_triton_head),
        (_TRITON_TRY.search, _on_triton_try),
        (_TRITON_FAIL.match, _on_triton_fail),
        (_GETS.match, _on_gets),
        (_BENCH_ALL.match, _on_bench_all),
        (_BEST.match, _on_best),
        (_CD_START.match, _on_cd_start),
        (_CD_BASE.match, _on_cd_base),
        (_CD_IMPROVE.match, _on_cd_improve),
        (_COORDESC.match, _on_coordesc),
    )

    def _text_rest(self, lineno: int, m: re.Match | None, pid: Any, msg: str) -> None:
        """A line no rule takes: a timing of an open benchmark, a config of a declared list, or
        a line cut short."""
        timed = _TIMING_TAIL.match(msg)
        if timed is not None and pid in self.open_bench:
            cfg = parse_config_str(timed.group("cfg"))
            if cfg is None:
                self.skip(lineno, "benchmark line with an unreadable config")
                return
            self.open_bench[pid].timings.append(self._timing(cfg, timed))
            self.seen(FMT_DEBUG)
            return
        if timed is None and pid in self.declaring and self._declared_config(lineno, m, pid, msg):
            return
        if pid in self.open_bench and timed is None:
            bench = self.open_bench[pid]
            if "num_warps" in msg or "nreg" in msg:
                self.skip(lineno, f"truncated benchmark line for {bench.kernel}")
                return
            if m is not None and m.group("site").split(":")[0].endswith("triton_heuristics.py"):
                self.open_bench.pop(pid, None)
        if timed is not None:
            self.skip(lineno, "benchmark timing line without a preceding "
                              "'Benchmark all input configs' line")
            return
        if any(anchor in msg for anchor in _ANCHORS):
            self.skip(lineno, "autotune log line in an unrecognised or truncated form")
        elif self.formats.keys() == {FMT_EVENTS}:
            self.skip(lineno, "not a JSON line in a JSON Lines capture log")
        elif "num_warps" in msg and TEXT_FIELD.match(msg) and parse_config_str(msg) is None \
                and (m is None or m.group("site").split(":")[0].endswith(_TUNER_SITES)):
            self.skip(lineno, "config line cut short")

    def _declared_config(self, lineno: int, m: re.Match | None, pid: Any, msg: str) -> bool:
        """A line after 'CachingAutotuner gets N configs': one of them (True), a truncated one
        (True, skipped), else the list ends (False)."""
        cfg = parse_config_str(msg)
        name, n = self.declaring[pid]
        fact = self.out.fact(name)
        if cfg is not None:
            fact.configs.append(cfg)
            if len(fact.configs) >= n:
                self.declaring.pop(pid, None)
            self.seen(FMT_DEBUG)
            return True
        if "num_warps" in msg and m is not None:
            self.skip(lineno, f"config line of 'CachingAutotuner gets {n} configs for {name}' "
                              "is truncated")
            return True
        self.declaring.pop(pid, None)
        return False

    def _timing(self, cfg: dict, m: re.Match) -> Timing:
        return Timing(cfg, _ms(m.group("ms")), _int(m.group("nreg")), _int(m.group("nspill")),
                      _int(m.group("shared")))

    def _best_line(self, lineno: int, pid: Any, name: str, rest: str) -> None:
        timed = _TIMING_TAIL.match(rest)
        cfg = parse_config_str(timed.group("cfg")) if timed else None
        if cfg is None:
            self.skip(lineno, f"'Best config for {name}' line is truncated or unreadable")
            return
        self.seen(FMT_DEBUG)
        target = next((t for t in reversed(self.out.tunings)
                       if t.kernel == name and t.fmt == FMT_DEBUG and t.phase == "autotune"
                       and t.pid == pid and t.winner is None), None)
        if target is None:
            target = self.add_tuning(Tuning(kernel=name, origin=self.where(lineno), fmt=FMT_DEBUG,
                                            pid=pid))
            target.timings.append(self._timing(cfg, timed))
        target.winner, target.winner_ms = cfg, _ms(timed.group("ms"))
        if target.statistic == "unknown":
            target.statistic = "min"
            target.statistic_basis = ("inferred: 'Best config for' is logged from torch 2.9, whose "
                                      "default benchmarker returns the minimum")
        self.last_kernel[pid] = name

    def _coordesc_for(self, pid: Any, name: str, lineno: int) -> Tuning:
        tuning = self.coordesc.get(pid)
        if tuning is None or tuning.kernel != name:
            tuning = self.add_tuning(Tuning(kernel=name, origin=self.where(lineno), fmt=FMT_DEBUG,
                                            phase="coordesc", pid=pid))
            self.coordesc[pid] = tuning
        return tuning

    def _coordesc_probe(self, lineno: int, pid: Any, rest: str) -> None:
        timed = _TIMING_TAIL.match(rest)
        cfg = parse_config_str(timed.group("cfg")) if timed else None
        if cfg is None:
            self.skip(lineno, "COORDESC line is truncated or unreadable")
            return
        tuning = self.coordesc.get(pid)
        if tuning is None:
            name = self.last_kernel.get(pid)
            if name is None:
                self.skip(lineno, "COORDESC line with no kernel to attach it to")
                return
            tuning = self._coordesc_for(pid, name, lineno)
        tuning.timings.append(self._timing(cfg, timed))
        self.seen(FMT_DEBUG)


_NO_RECORDS = ("no autotune records recognised (expected autotune.log JSON Lines, "
               "TRITON_PRINT_AUTOTUNING output, a kernel_autotune metric table or "
               "TORCH_LOGS=+inductor lines)")


def _problem(head: bytes) -> str | None:
    """Why a file cannot be an autotune log at all (``head``: its first non-blank block, b""
    when it is empty or blank), or None."""
    if not head:
        return "empty file"
    if head[:4096].count(b"\x00") > 64:  # a few NULs (a torn write) do not make it binary
        return "binary file, expected a text autotune log"
    return None


def _head(fh) -> bytes:
    """The first 4 KiB of the file, or where those are blank the first block that is not (b""
    for a blank file), read a block at a time: a file of blanks is never held whole."""
    head = fh.read(4096)
    while head and not head.strip():
        head = fh.read(1 << 20)
    return head


@contextlib.contextmanager
def paused_gc():
    """The cyclic garbage collector off for a while: parsing and summarizing allocate millions of
    small objects and make no cycles, and every collection would walk all of them again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse_files(paths: list[str | Path]) -> ParsedLogs:
    """Parse every file (with the garbage collector paused).

    One file that is empty, binary or holds no autotune record is an InputError.  Among several
    files such a file is listed in ``skipped`` instead (a run's log may hold no autotune lines while
    its capture log does), unless none of them holds a record.  A missing file is always an error.
    """
    with paused_gc():
        return _parse_files(paths)


def _parse_files(paths: list[str | Path]) -> ParsedLogs:
    out = ParsedLogs()
    empties: list[tuple[Path, str]] = []
    for raw in paths:
        path = Path(raw)
        with inputs.open_input(path, "an autotune log") as fh:  # missing, a folder, a FIFO: an error
            problem = _problem(_head(fh))
            if problem is None:
                parser = _FileParser(path, out)
                fh.seek(0)
                parser.parse(inputs.capped_lines(fh))  # line by line: the file is never held whole
                if parser.records == 0:
                    problem = _NO_RECORDS
                else:
                    out.inputs.append({"path": str(path), "formats": parser.formats,
                                       "skipped": sum(1 for s in out.skipped
                                                      if s["where"].rsplit(":", 1)[0] == str(path)),
                                       "overlong_lines": parser.overlong})
        if problem is not None:
            if len(paths) == 1:
                raise InputError(f"{path}: {problem}")
            empties.append((path, problem))
    if empties and not out.inputs:
        path, problem = empties[0]
        raise InputError(f"{path}: {problem}" + (f" (nor any of the other {len(empties) - 1} files)"
                                                 if len(empties) > 1 else ""))
    for path, problem in empties:
        out.skipped.append({"where": str(path), "reason": problem})
        out.inputs.append({"path": str(path), "formats": {}, "skipped": 1, "overlong_lines": 0})
    return out


