filejobs request "$IMAGE_ID" thumbnail_generation --option sizes=64,1024 --option format=jpeg
filejobs request "$FILE_ID" compression --options '{"algorithm": "gzip", "level": 9}'
filejobs request "$VIDEO_ID" video_thumbnail
filejobs request "$PDF_ID" document_preview
filejobs request "$FILE_ID" virus_scan
filejobs request "$FILE_ID" deduplication_check
