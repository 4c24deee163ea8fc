"""The virus_scan job: engines (YARA in-process, ClamAV as a subprocess) and the processor.

`engines.py` holds the Scanner protocol and the two engines, `archives.py` the bounded in-process
unpacking YARA scans through, `signatures.py` the delivery of definitions from S3, and
`processor.py` the job itself (verdict, tag, quarantine).
"""
