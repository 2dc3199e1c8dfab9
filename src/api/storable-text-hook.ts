import type { FastifyRequest, preValidationHookHandler } from 'fastify';
import { ValidationError, type ValidationIssue } from '../vocabulary/errors.js';
import { MAX_ISSUES, unstorableTextIssues } from '../validation/storable-text.js';

/**
 * Refuses a request whose query or path parameters (and body, unless its route checks and records
 * its own) hold text that cannot be stored. Runs after authentication, before the handler.
 */
export const refuseUnstorableText: preValidationHookHandler = (request, _reply, done) => {
  const issues = [
    ...unstorableTextIssues(request.params ?? {}),
    ...unstorableTextIssues(request.query ?? {}),
    ...(request.routeOptions.config.checksOwnBody ? [] : bodyIssues(request)),
  ];
  done(issues.length > 0 ? new ValidationError(issues.slice(0, MAX_ISSUES)) : undefined);
};

function bodyIssues(request: FastifyRequest): ValidationIssue[] {
  return request.body === undefined ? [] : unstorableTextIssues(request.body);
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The handler checks its body's text itself (POST /v1/generations, which records the rejection). */
    checksOwnBody?: boolean;
  }
}
