"""Decoders run without credentials: untrusted bytes are parsed in a child process.

The worker (the parent) keeps every AWS call: it downloads the object, hands the decoder an open,
read-only file descriptor of it, and uploads what the decoder returns. The decoder runs in a
grandchild forked, one per job, from a warm `zygote` that was started with a scrubbed
environment and gave up its capabilities before it imported a decoder:

- no AWS credentials reach it (no `AWS_*` variable, no credentials file, no instance metadata);
- the worker is made non-dumpable, so `/proc/<worker>/environ` and its memory are closed to it;
- it runs under limits on address space, CPU time, open files and file size, and its reply is
  capped; each breach is a permanent, readable job failure (client.py says which);
- its reply is JSON, never a pickle, checked by the worker before anything is stored;
- it opens no socket but Unix ones and signals neither the worker nor the zygote (a seccomp
  filter), works in a private directory and, under Landlock, writes nowhere else and reads no
  other job's; nothing it starts outlives its job; a crash, a limit breach or a timeout
  recycles the sandbox.

`client.Sandbox` is the worker's side, `zygote` the child's program, `limits.DecoderLimits`
what a job may use, `privileges` the Linux calls that shed power, `confinement` the seccomp
filter (clamd's too), `landlock` the file system rules, `recycling` the word to the worker.
"""
