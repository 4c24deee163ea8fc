// In the page: ask your backend for a signed upload, post the file straight to the bucket, then
// wait for your backend to say the file is processed (it hears so from the signed webhook).

export async function uploadFile(file) {
  const asked = await fetch("/api/uploads", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ filename: file.name, content_type: file.type || null }),
  });
  if (!asked.ok) throw new Error(`no signed upload: ${asked.status}`);
  const signed = await asked.json();
  if (file.size > signed.max_bytes) throw new Error(`larger than ${signed.max_bytes} bytes`);

  const form = new FormData();
  for (const [name, value] of Object.entries(signed.fields)) form.append(name, value);
  form.append("file", file); // last: S3 reads no field after the file
  const stored = await fetch(signed.url, { method: "POST", body: form });
  if (!stored.ok) throw new Error(`the bucket refused it: ${stored.status} ${await stored.text()}`);
  return signed.key;
}

export async function whenProcessed(key, { everyMs = 1000, timeoutMs = 120000 } = {}) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const answer = await fetch(`/api/uploads/processed?key=${encodeURIComponent(key)}`);
    if (answer.ok) return answer.json(); // {key, file_id, outputs: {job_type: [{name, url}]}}
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  throw new Error(`${key} not processed in ${timeoutMs / 1000} s`);
}
