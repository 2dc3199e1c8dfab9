import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import {
  CallToolRequestSchema,
  CancelTaskRequestSchema,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  ListTasksRequestSchema,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type CreateTaskResult,
} from '@modelcontextprotocol/sdk/types.js';
import type { BaseLogger } from 'pino';
import {
  cancel,
  describeModel,
  getCredits,
  getKeyLimits,
  listGenerations,
  listModels,
  quote,
} from './account-tools.js';
import { readOnlyRefusal } from '../generations/key-rules.js';
import {
  createGenerationTask,
  cancelTask,
  getTask,
  listTasks,
  taskOf,
  taskResult,
} from './generation-tasks.js';
import { createGeneration, getGeneration, ProgressReporter } from './generation-tools.js';
import type { McpCaller, McpDeps } from './mcp-deps.js';
import { toolNames, type ToolName } from './tool-arguments.js';
import { toolDefinitions } from './tool-definitions.js';
import { asApiError, errorResult } from './tool-results.js';
import type { ApiError } from '../errors.js';
import { GenerationRefused } from '../generations/admit-generation.js';

export const serverInfo = {
  name: 'generation-service',
  title: 'Image and video generation',
  version: '1.0.0',
};

/** One for every server of the process: made per server, it cost 0.6 ms of each request. */
const jsonSchemaValidator = new AjvJsonSchemaValidator();

const instructions =
  'Generates images and videos from text prompts (and reference images), paid in credits. list_models to choose a model, describe_model for its options, quote to price a request, create_generation to make it (pass back the idempotency_key it returns when retrying), get_generation to wait for or fetch a result.';

/**
 * One MCP server for one HTTP request (stateless: nothing outlives the request, so any API process
 * answers any request): tools over admission and the API's reads, and tasks that are generations.
 * A tool's failure is its result (`isError`, the API's code and message); an unknown tool, an
 * unknown task or a malformed request is a protocol error.
 */
export function buildMcpServer(
  deps: McpDeps,
  caller: McpCaller,
  log: Pick<BaseLogger, 'warn' | 'error'>,
  /**
   * Why the key's account may not act (the paid-purchase rule's 403, access disabled): the server
   * still answers the protocol and lists its tools, and every tool call is that error in words.
   */
  refusal?: ApiError,
): Server {
  const server = new Server(serverInfo, {
    instructions,
    jsonSchemaValidator,
    capabilities: {
      tools: { listChanged: false },
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    },
  });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: toolDefinitions(deps) }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { name, arguments: args, task } = request.params;
    if (!(toolNames as readonly string[]).includes(name))
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}. tools/list names every tool.`);
    if (task && name !== 'create_generation')
      throw new McpError(
        ErrorCode.InvalidParams,
        `Tool ${name} cannot be called as a task; call it without "task".`,
      );
    const refused =
      refusal ?? (caller.access === 'read_only' && changingTools.has(name) ? readOnlyRefusal() : undefined);
    if (refused) {
      if (task) throw new McpError(ErrorCode.InvalidRequest, `${refused.code}: ${refused.message}`);
      caller.noteError?.(refused.code);
      return errorResult(refused);
    }
    const progress = new ProgressReporter(request.params._meta?.progressToken, (n) =>
      extra.sendNotification(n),
    );
    try {
      if (task) return await createGenerationTask(deps, caller, args, log);
      return await callTool(deps, caller, name as ToolName, args, progress, log);
    } catch (error) {
      const apiError = asApiError(error);
      if (apiError.status >= 500) log.error({ err: error, tool: name }, 'an MCP tool call failed');
      caller.noteError?.(apiError.code);
      if (task) return refusedTask(deps, caller, error, apiError);
      // A refused create names the generation its refusal was recorded as.
      return errorResult(
        apiError,
        error instanceof GenerationRefused ? { generation: { id: error.generationId } } : {},
      );
    }
  });
  if (refusal) {
    const refuse = () => {
      throw new McpError(ErrorCode.InvalidRequest, `${refusal.code}: ${refusal.message}`);
    };
    for (const schema of [
      GetTaskRequestSchema,
      GetTaskPayloadRequestSchema,
      ListTasksRequestSchema,
      CancelTaskRequestSchema,
    ])
      server.setRequestHandler(schema, refuse);
    return server;
  }
  server.setRequestHandler(GetTaskRequestSchema, (request) => getTask(deps, caller, request.params.taskId));
  server.setRequestHandler(GetTaskPayloadRequestSchema, (request) =>
    taskResult(deps, caller, request.params.taskId),
  );
  server.setRequestHandler(ListTasksRequestSchema, (request) =>
    listTasks(deps, caller, request.params?.cursor),
  );
  server.setRequestHandler(CancelTaskRequestSchema, async (request) => ({
    ...(await cancelTask(deps, caller, request.params.taskId)),
  }));
  return server;
}

/**
 * A create called as a task that admission refused: admission recorded the refusal as a rejected
 * generation (402, 429 concurrency), so the task is that generation, failed, its statusMessage the
 * API's code and message, and tasks/result its tool error. Anything else (an invalid request, a
 * conflicting key, an outage) made no task: a protocol error with the API's code and message.
 */
async function refusedTask(
  deps: McpDeps,
  caller: McpCaller,
  error: unknown,
  apiError: ApiError,
): Promise<CreateTaskResult> {
  const row =
    error instanceof GenerationRefused && error.outcome === 'rejected'
      ? await deps.readGeneration(caller.accountId, error.generationId)
      : null;
  if (row) return { task: taskOf(row) };
  throw new McpError(ErrorCode.InvalidParams, `${apiError.code}: ${apiError.message}`, {
    error: { code: apiError.code, message: apiError.message },
    ...(apiError.extra.issues && { issues: apiError.extra.issues }),
  });
}

/** The tools a read-only key may not call: they create or cancel. */
const changingTools: ReadonlySet<string> = new Set(['create_generation', 'cancel_generation']);

function callTool(
  deps: McpDeps,
  caller: McpCaller,
  name: ToolName,
  args: unknown,
  progress: ProgressReporter,
  log: Pick<BaseLogger, 'warn'>,
): Promise<CallToolResult> | CallToolResult {
  switch (name) {
    case 'list_models':
      return listModels(deps, args);
    case 'describe_model':
      return describeModel(deps, args);
    case 'quote':
      return quote(deps, caller, args);
    case 'create_generation':
      return createGeneration(deps, caller, args, progress, log);
    case 'get_generation':
      return getGeneration(deps, caller, args, progress);
    case 'list_generations':
      return listGenerations(deps, caller, args);
    case 'cancel_generation':
      return cancel(deps, caller, args);
    case 'get_credits':
      return getCredits(deps, caller, args);
    case 'get_key_limits':
      return getKeyLimits(deps, caller, args);
  }
}
