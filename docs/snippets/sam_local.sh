sam build
export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_DEFAULT_REGION=us-east-1
sam local invoke SweepFunction -e events/sweep_schedule.json \
  --env-vars .filejobs/sam-env.json --docker-network host
sam local invoke ApiFunction -e events/api_get_job.json \
  --env-vars .filejobs/sam-env.json --docker-network host      # as tenant acme (its authorizer context)
sam local start-api --port 3001 --env-vars .filejobs/sam-env.json --docker-network host
