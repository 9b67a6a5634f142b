// Play a session from Node.js: `node play.mjs 127.0.0.1:50150 "I open the door."` (COVEL_API_TOKEN when the stack asks).
import { connect, CovelError } from "@covel/client";

const [addr, ...actions] = process.argv.slice(2);
const covel = connect(addr, { token: process.env.COVEL_API_TOKEN });
const excluded = (process.env.EXCLUDED_PLUGINS ?? "").split(",").filter(Boolean);
const session = await covel.createSession({ excluded_plugins: excluded });
console.log(`session ${session.id}`);
for (const text of actions.length ? actions : ["I look around."]) {
  const turn = await covel.play(session.id, text);
  console.log(`> ${text}\n${turn.narrative}\n`);
}
let recorded = 0;
for await (const _turn of covel.turns(session.id, 1)) recorded += 1;
console.log(`${recorded} turns recorded`);
try {
  await covel.getSession("no-such-session");
} catch (error) {
  if (!(error instanceof CovelError)) throw error;
  console.log(`asked for a missing session: ${error.codeName} ${error.reason} ${JSON.stringify(error.resource)}`);
}
covel.close();
