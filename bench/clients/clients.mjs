import { generateText, streamText, tool, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';
import OpenAI from 'openai';
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, OpenAIChatCompletionsModel, setTracingDisabled } from '@openai/agents';

const base = process.env.BASE ?? 'http://127.0.0.1:8080/v1';
const results = [];
async function check(name, fn) {
  try { const r = await fn(); results.push(`PASS ${name}: ${String(r).slice(0, 60).replace(/\n/g, ' ')}`); }
  catch (e) { results.push(`FAIL ${name}: ${e?.message ?? e}`); }
}
const provider = createOpenAI({ baseURL: base, apiKey: 'x' });
await check('ai-sdk responses generateText', async () => (await generateText({ model: provider('demo'), prompt: 'Hi', maxOutputTokens: 8 })).finishReason);
await check('ai-sdk chat generateText', async () => (await generateText({ model: provider.chat('demo'), prompt: 'Hi', maxOutputTokens: 8 })).finishReason);
await check('ai-sdk responses streamText', async () => { const r = streamText({ model: provider('demo'), prompt: 'Hi', maxOutputTokens: 8 }); let t = ''; for await (const p of r.textStream) t += p; return (await r.finishReason); });
await check('ai-sdk tools multi-step', async () => (await generateText({ model: provider('demo'), prompt: 'weather?', maxOutputTokens: 64, stopWhen: stepCountIs(2), toolChoice: 'required',
  tools: { weather: tool({ description: 'weather', inputSchema: z.object({ city: z.string().max(8) }), execute: async ({ city }) => 'sunny' }) } })).steps.length);
const client = new OpenAI({ baseURL: base, apiKey: 'x' });
await check('openai-node responses', async () => (await client.responses.create({ model: 'demo', input: 'Hi', max_output_tokens: 8 })).status);
await check('openai-node chat stream', async () => { const s = await client.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, stream: true }); let n = 0; for await (const c of s) n++; return n; });
setTracingDisabled(true);
setDefaultOpenAIClient(client);
setOpenAIAPI('responses');
await check('agents-sdk responses', async () => (await run(new Agent({ name: 'a', instructions: 'Be brief.', model: 'demo', modelSettings: { maxTokens: 1500 } }), 'Hi')).finalOutput !== undefined);
await check('agents-sdk chat model', async () => (await run(new Agent({ name: 'b', model: new OpenAIChatCompletionsModel(client, 'demo'), modelSettings: { maxTokens: 8 } }), 'Hi')).finalOutput !== undefined);
console.log(results.join('\n'));
