import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";
import { Chat } from "./Chat";
import { Portal } from "./Portal";
import "./styles.css";

// Two screens, chosen by the URL: ?workflowId=<id> is the chat page of that durable
// Agent (a reload resumes it); no workflowId is the Agent Portal.
function App() {
  const [workflowId, setWorkflowId] = useState(() => new URLSearchParams(location.search).get("workflowId"));

  function open(id: string | null) {
    history.replaceState(null, "", id ? `?workflowId=${encodeURIComponent(id)}` : location.pathname);
    setWorkflowId(id);
  }

  return workflowId ? (
    <Chat key={workflowId} workflowId={workflowId} onNewAgent={() => open(null)} />
  ) : (
    <Portal onStarted={open} />
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
