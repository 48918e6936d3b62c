"""nvidia-smi sampled in a thread: memory used, SM clock, power draw and the clock-limit reasons, twice a second.
An H200 running dense bf16 GEMMs sits at its 700 W cap and lowers its SM clock from 1980 MHz to ~1500 (reason
0x4, the software power cap): the samples say which clock a figure was measured at. On a machine without
nvidia-smi the sampler records nothing and every summary is None.
"""
import statistics
import subprocess
import threading
import time

QUERY = "memory.used,clocks.sm,power.draw,clocks_event_reasons.active"


class GpuSampler(threading.Thread):
    def __init__(self, period_s=0.5):
        super().__init__(daemon=True)
        self.period_s = period_s
        self.samples = []  # (time, memory MiB, SM MHz, power W, reasons)
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout.strip().splitlines()
                if out:  # first GPU
                    mem, clock, power, reasons = [x.strip() for x in out[0].split(",")]
                    self.samples.append((time.time(), int(mem), float(clock), float(power), reasons))
            except (OSError, ValueError, subprocess.SubprocessError):
                return
            self.stop.wait(self.period_s)

    def finish(self):
        self.stop.set()
        self.join(timeout=6)

    @property
    def peak_mib(self):
        return max((s[1] for s in self.samples), default=None)

    def summary(self, since=None, until=None, busy_watts=300.0):
        """Median SM clock and power over the busy samples (power above busy_watts) in [since, until]."""
        busy = [s for s in self.samples if (since is None or s[0] >= since) and (until is None or s[0] <= until)
                and s[3] >= busy_watts]
        if not busy:
            return {"samples": 0, "sm_clock_mhz": None, "power_w": None, "power_capped_share": None}
        capped = sum(1 for s in busy if _power_capped(s[4]))
        return {"samples": len(busy), "sm_clock_mhz": statistics.median(s[2] for s in busy),
                "power_w": statistics.median(s[3] for s in busy), "power_capped_share": capped / len(busy)}


def _power_capped(reasons):
    try:
        return bool(int(reasons, 16) & 0x4)  # clocks_event_reason_sw_power_cap
    except ValueError:
        return False
