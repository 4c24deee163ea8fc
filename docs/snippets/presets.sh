curl -X PUT "$API/presets/avatars?tenant=acme" -H "Authorization: Bearer $TOKEN" -d '{
  "jobs": [{"job_type": "virus_scan"},
           {"job_type": "thumbnail_generation", "options": {"sizes": [512], "format": "webp"}}],
  "prefixes": ["uploads/acme/avatars/"]}'
filejobs presets set contracts --tenant acme --job virus_scan \
    --job "document_preview" --prefix uploads/acme/contracts/
filejobs presets set archive --tenant acme --store-only --prefix uploads/acme/archive/
filejobs presets set quick --tenant acme --scan-only --tenant-default
aws s3 cp scan.pdf "s3://$UPLOADS/uploads/acme/inbox/scan.pdf" --endpoint-url "$ENDPOINT" \
    --metadata filejobs-preset=contracts
