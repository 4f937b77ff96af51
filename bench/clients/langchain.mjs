import { ChatOpenAI } from '@langchain/openai';
const cfg = { model: 'demo', apiKey: 'x', configuration: { baseURL: process.env.BASE ?? 'http://127.0.0.1:8080/v1' }, maxTokens: 8 };
for (const [name, extra] of [['chat', {}], ['responses', { useResponsesApi: true }]]) {
  try {
    const m = new ChatOpenAI({ ...cfg, ...extra });
    const r = await m.invoke('Hi');
    let n = 0; for await (const c of await m.stream('Hi')) n++;
    console.log('PASS langchain', name, typeof r.content, 'chunks', n);
  } catch (e) { console.log('FAIL langchain', name, e.message); }
}
