import { Webhook, WebhookVerificationError } from 'svix';

export type SignatureCheck =
  | { verdict: 'valid'; payload: unknown }
  /** Signed by the sender, so not an attack: a payload we cannot read (422, not 400). */
  | { verdict: 'valid-not-json' }
  | { verdict: 'invalid'; reason: string };

/**
 * Svix signature over the exact raw bytes. Svix also rejects timestamps more than five
 * minutes off, which stops a captured delivery from being replayed later.
 */
export function createSignatureVerifier(secret: string) {
  const webhook = new Webhook(secret);
  return (rawBody: Buffer, headers: Record<string, string | string[] | undefined>): SignatureCheck => {
    const header = (name: string) => {
      const value = headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const svixHeaders = {
      'svix-id': header('svix-id') ?? '',
      'svix-timestamp': header('svix-timestamp') ?? '',
      'svix-signature': header('svix-signature') ?? '',
    };
    const missing = Object.entries(svixHeaders)
      .filter(([, v]) => v === '')
      .map(([k]) => k);
    if (missing.length > 0) return { verdict: 'invalid', reason: `missing ${missing.join(', ')}` };
    try {
      webhook.verify(rawBody, svixHeaders);
    } catch (error) {
      if (error instanceof WebhookVerificationError) return { verdict: 'invalid', reason: error.message };
      throw error;
    }
    // svix 2 checks the bytes only; the JSON is parsed once the signature checked out.
    try {
      return { verdict: 'valid', payload: JSON.parse(rawBody.toString('utf8')) as unknown };
    } catch {
      return { verdict: 'valid-not-json' };
    }
  };
}
