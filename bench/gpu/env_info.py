"""Records where and what ran: date, commit (.carry/COMMIT, written by prepare_carry.sh), the exact command,
GPU, library versions, whether the carried fovea binary runs here (missing shared libraries)."""
import json
import os
import platform
import subprocess
import sys
import time


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"n/a ({e})"


def main():
    out, command, fovea = sys.argv[1:4]
    info = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": command,
            "commit": open(".carry/COMMIT").read().strip() if os.path.exists(".carry/COMMIT") else "unknown",
            "host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "gpu": run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]),
            "fovea": fovea, "fovea_runs": os.access(fovea, os.X_OK),
            "fovea_missing_libs": run(["sh", "-c", f"ldd '{fovea}' 2>&1 | grep 'not found' || true"])}
    for module in ("torch", "transformers", "PIL", "numpy", "safetensors"):
        try:
            info[module] = __import__(module).__version__
        except ImportError as e:
            info[module] = f"n/a ({e})"
    with open(out, "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
