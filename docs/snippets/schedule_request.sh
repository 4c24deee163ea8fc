curl -X POST "$API/schedules" -H "Authorization: Bearer $TOKEN" -d '{
  "name": "avatars nightly", "expression": "cron(0 3 * * ? *)", "timezone": "Europe/Paris",
  "action": "run", "job_type": "thumbnail_generation", "input_data": {"sizes": [64, 256]},
  "prefix": "uploads/acme/avatars/", "tenant": "acme"}'
