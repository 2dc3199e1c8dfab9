import { z } from 'zod';
import { addressRanges, int, settingGroup } from './setting.js';

/** The account console (`npm run console`): where it listens and the address people open. */
export const consoleSettings = settingGroup({
  title: 'Account console',
  shape: {
    CONSOLE_HOST: z.string().default('127.0.0.1'),
    CONSOLE_PORT: int(8082),
    CONSOLE_PUBLIC_URL: z.string().url().optional(),
    OAUTH_ACCESS_TOKEN_TTL_SECONDS: int(3600, 60),
    OAUTH_REFRESH_TOKEN_TTL_SECONDS: int(30 * 24 * 3600, 3600),
    OAUTH_CLIENT_METADATA_ALLOW_CIDRS: addressRanges(),
    OAUTH_CLIENT_METADATA_TIMEOUT_MS: int(5_000, 100),
    OAUTH_REGISTRATIONS_PER_HOUR: int(20, 1),
    OAUTH_CLIENT_METADATA_FETCHES_PER_MINUTE: int(10, 1),
  },
  docs: {
    CONSOLE_HOST: { readBy: ['console'], text: 'The address the account console listens on.' },
    CONSOLE_PORT: { readBy: ['console'], text: 'The port the account console listens on.' },
    CONSOLE_PUBLIC_URL: {
      readBy: ['api', 'console', 'admin', 'start'],
      text: 'The console’s public base URL: sign-in links are made with it, and its session cookie is `Secure` unless it is a loopback `http://` address. It is the OAuth issuer chat apps sign in through (the API’s protected-resource metadata names it).',
      default: '`http://CONSOLE_HOST:CONSOLE_PORT`',
    },
    OAUTH_ACCESS_TOKEN_TTL_SECONDS: {
      readBy: ['console'],
      text: 'How long an OAuth access token a chat app gets for the MCP endpoint is good for; the app then uses its refresh token. Tokens are opaque and stored only as their SHA-256. See [OAuth for chat apps](operating.md#oauth-for-chat-apps).',
    },
    OAUTH_REFRESH_TOKEN_TTL_SECONDS: {
      readBy: ['console'],
      text: 'How long an unused refresh token is good for. Each use rotates it (a new one, the same lifetime again); a used one sent again revokes the app’s grant.',
    },
    OAUTH_CLIENT_METADATA_ALLOW_CIDRS: {
      readBy: ['console'],
      text: 'Non-public ranges (CIDRs or addresses, comma-separated) where a chat app’s Client ID Metadata Document (its `client_id`, an `https://` URL the console fetches) may be. Any app chooses that URL: leave it empty in production. Cloud metadata stays refused.',
      default: '(none)',
    },
    OAUTH_CLIENT_METADATA_TIMEOUT_MS: {
      readBy: ['console'],
      text: 'The time limit for fetching a Client ID Metadata Document (at most 5 KiB, no redirects); past it the app’s sign-in is refused.',
    },
    OAUTH_REGISTRATIONS_PER_HOUR: {
      readBy: ['console'],
      text: 'How many apps one client address may register (Dynamic Client Registration, `POST /oauth/register`, open to anyone) per hour, per console process; past it `429 too_many_requests` with `Retry-After`. An app registers once per server: this bounds what a script can store, not people. Counted by the address `TRUST_PROXY` resolves, an IPv6 client by its `FAILED_AUTH_IPV6_PREFIX` network.',
    },
    OAUTH_CLIENT_METADATA_FETCHES_PER_MINUTE: {
      readBy: ['console'],
      text: 'How many Client ID Metadata Documents the console fetches for one client address per minute, per console process (a document still cached costs nothing); past it the app’s request is refused, `429 too_many_requests`.',
    },
  },
});
