// The chat scenario under node. Usage: node ai_chat_client.mjs <baseUrl> <sessionId>;
// prints one JSON report line.
import { runChatScenario } from "./ai_chat_scenario.mjs";

const [baseUrl, sessionId] = process.argv.slice(2);
const report = await runChatScenario({
  baseUrl,
  sessionId,
  approve: (chat, request) => chat.addToolApprovalResponse({ id: request.approval.id, approved: true }),
});
console.log(JSON.stringify(report));
