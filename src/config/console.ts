import { z } from 'zod';
import { int, settingGroup } from './setting.js';

/** The account console (`npm run console`): where it listens and the address people open. */
export const consoleSettings = settingGroup({
  title: 'Account console',
  shape: {
    CONSOLE_HOST: z.string().default('127.0.0.1'),
    CONSOLE_PORT: int(8082),
    CONSOLE_PUBLIC_URL: z.string().url().optional(),
  },
  docs: {
    CONSOLE_HOST: { readBy: ['console'], text: 'The address the account console listens on.' },
    CONSOLE_PORT: { readBy: ['console'], text: 'The port the account console listens on.' },
    CONSOLE_PUBLIC_URL: {
      readBy: ['console', 'admin', 'start'],
      text: 'The console’s public base URL: sign-in links are made with it, and its session cookie is `Secure` unless it is a loopback `http://` address.',
      default: '`http://CONSOLE_HOST:CONSOLE_PORT`',
    },
  },
});
