/**
 * AgentMail's error bodies, as the SDK parses them (serialization/types/ErrorResponse and
 * ValidationErrorResponse): `{ name, message, code? }`, and for 400 `{ name, message, errors }`.
 * The SDK maps the status code to its error class (400 ValidationError, 404 NotFoundError,
 * 409 ConflictError, 403 MessageRejectedError on sends); `name` is informational.
 */
export interface ErrorBody {
  name: string;
  message: string;
  code?: string;
  errors?: unknown;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
  ) {
    super(body.message);
    this.name = 'ApiError';
  }

  static notFound(what: string): ApiError {
    return new ApiError(404, { name: 'NotFoundError', message: `${what} not found` });
  }

  static validation(message: string, errors: unknown = [{ message }]): ApiError {
    return new ApiError(400, { name: 'ValidationError', message, errors });
  }

  static conflict(message: string, code: string): ApiError {
    return new ApiError(409, { name: 'ConflictError', message, code });
  }
}

const NAMES: Record<number, string> = {
  400: 'ValidationError',
  401: 'UnauthorizedError',
  403: 'ForbiddenError',
  404: 'NotFoundError',
  409: 'ConflictError',
  429: 'TooManyRequestsError',
  503: 'ServiceUnavailableError',
};

/** For statuses that carry no domain meaning here (faults, framework errors). */
export function errorBodyFor(status: number, message: string): ErrorBody {
  const name = NAMES[status] ?? (status >= 500 ? 'InternalServerError' : 'Error');
  return status === 400 ? { name, message, errors: [{ message }] } : { name, message };
}
