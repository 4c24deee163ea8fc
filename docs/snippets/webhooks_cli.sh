filejobs webhooks add https://hooks.example.com/filejobs --event "Job Completed" \
    --event "File Processed" --tenant acme --description "orders app"  # prints the secret, once
filejobs webhooks list --tenant acme
filejobs webhooks show "$WEBHOOK_ID"
filejobs webhooks rotate "$WEBHOOK_ID" --overlap-hours 24  # prints the new secret, once
filejobs webhooks enable "$WEBHOOK_ID"                     # after it was disabled
filejobs webhooks deliveries "$WEBHOOK_ID" --limit 25      # the delivery log, newest first
filejobs webhooks resend "$WEBHOOK_ID" "$DELIVERY_ID"
filejobs webhooks remove "$WEBHOOK_ID"
