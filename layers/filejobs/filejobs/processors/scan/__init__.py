"""The virus_scan job's engines and processor.

- `engines.py`: the Scanner protocol, YARA in-process (through `archives.py`, bounded
  unpacking) and `clamscan` per file (the benchmark's baseline and the updater's check);
- `clamd.py`: ClamAV warm, one clamd per execution environment fed each file by descriptor;
- `current.py`: the engines of the current definitions set, failing closed without usable ones;
- `freshclam.py`: the definitions updater's freshclam, its settings and the check of a new set;
- `environment.py`: what those programs see of the worker's environment (no credentials), and
  the wrapper that starts clamd and clamscan confined (no socket but Unix ones);
- `sealed.py`: the upload as the engines read it, sealed, with no path to swap or rewrite;
- `processor.py`: the scan of one job's file and its verdict (services/virus_scan.py acts on it).
"""
