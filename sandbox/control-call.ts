/**
 * One JSON call to a stand-in's control API (the sandbox, the model and the help-desk stand-ins),
 * for their typed clients: the answer's body, or an error naming the stand-in, route and status.
 */
export async function controlCall<T>(
  standIn: string,
  baseUrl: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<T> {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
  });
  const parsed = (await response.json()) as T;
  if (!response.ok)
    throw new Error(`${standIn} ${method} ${path} answered ${response.status}: ${JSON.stringify(parsed)}`);
  return parsed;
}
