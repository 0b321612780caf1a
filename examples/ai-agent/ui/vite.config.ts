import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// The bundle is checked in under the Python package, with stable names, so the app
// serves it with no build step; `npm run build` refreshes it and its source hash.
export default defineConfig({
  plugins: [react()],
  base: "/products/ai-agent/",
  build: {
    outDir: "../src/dex_agents_ai_agent/static",
    emptyOutDir: true,
    rollupOptions: {
      output: {
        entryFileNames: "assets/app.js",
        chunkFileNames: "assets/[name].js",
        assetFileNames: "assets/[name][extname]",
      },
    },
  },
});
