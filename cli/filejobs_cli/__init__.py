"""The `filejobs` command line: uploads, status, jobs, cancels, retries, rescans, backfills and
definitions, on a deployed stack (--stack-name, --api-url) or the local one. Needs boto3 only."""
