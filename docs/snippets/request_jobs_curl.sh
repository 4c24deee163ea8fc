job() { curl -s -X POST "$API/files/$1/jobs" -H "Authorization: Bearer $TOKEN" \
          -H 'Content-Type: application/json' -d "$2"; echo; }

job "$IMAGE_ID" '{"job_type": "thumbnail_generation", "input_data": {"sizes": [64, 1024], "format": "jpeg"}}'
job "$FILE_ID"  '{"job_type": "compression", "input_data": {"algorithm": "gzip", "level": 9}}'
job "$VIDEO_ID" '{"job_type": "video_thumbnail"}'
job "$PDF_ID"   '{"job_type": "document_preview"}'
job "$FILE_ID"  '{"job_type": "virus_scan"}'
job "$FILE_ID"  '{"job_type": "deduplication_check"}'
