/** A horizontal bar chart as a standalone SVG: one bar per label, value printed at its end. */
export function barChart(title: string, unit: string, bars: { label: string; value: number }[]): string {
  const width = 760;
  const left = 260;
  const barHeight = 22;
  const gap = 8;
  const top = 40;
  const height = top + bars.length * (barHeight + gap) + 20;
  const max = Math.max(...bars.map((bar) => bar.value), 1e-9);
  const xml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const rows = bars
    .map((bar, i) => {
      const y = top + i * (barHeight + gap);
      const w = Math.max(1, ((width - left - 110) * bar.value) / max);
      const value = bar.value >= 100 ? Math.round(bar.value).toLocaleString("en") : bar.value.toFixed(2);
      return [
        `<text x="${left - 8}" y="${y + 16}" text-anchor="end" font-size="13">${xml(bar.label)}</text>`,
        `<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${barHeight}" fill="${i % 2 === 0 ? "#3b6ea8" : "#5b8fc9"}"/>`,
        `<text x="${left + w + 6}" y="${y + 16}" font-size="13">${value} ${xml(unit)}</text>`,
      ].join("");
    })
    .join("\n");
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="12" y="24" font-size="16" font-weight="bold">${xml(title)}</text>
${rows}
</svg>
`;
}
