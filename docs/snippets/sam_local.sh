filejobs events         # with `filejobs dev` running: events/local/*.json, named with its ids
sam build               # container-free: the layers' Makefile fetches arm64 wheels
export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_DEFAULT_REGION=us-east-1
sam local invoke VirusScanWorker -e events/local/VirusScanWorker.json       # runs a pending job
sam local invoke ApiFunction -e events/local/ApiFunction-get-file.json      # as tenant acme
sam local start-api     # on 127.0.0.1:3001 (samconfig.toml); Ctrl-C stops it. Meanwhile:
curl -H "X-Filejobs-Local-Caller: tenant:acme" http://127.0.0.1:3001/jobs
