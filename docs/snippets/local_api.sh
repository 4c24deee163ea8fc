# The local stack's status API, its operator token and its uploads bucket, from the file
# `make dev` writes (run from the project's folder while the stack runs).
API=$(python3 -c 'import json; print(json.load(open(".filejobs/local.json"))["api_url"])')
TOKEN=$(python3 -c 'import json; print(json.load(open(".filejobs/local.json"))["api_token"])')
ENDPOINT=$(python3 -c 'import json; print(json.load(open(".filejobs/local.json"))["endpoint_url"])')
UPLOADS=$(python3 -c 'import json; print(json.load(open(".filejobs/local.json"))["uploads_bucket"])')
