// The "Claim next N for me" button says the number in the box beside it.
// The server clamps what it gets to 1..max, so the label does too.
"use strict";
document.addEventListener("input", (event) => {
  const box = event.target;
  if (!box.matches("form.dbqueue-claim input[name=n]")) {
    return;
  }
  const shown = box.form.querySelector(".dbqueue-claim-n");
  const n = Number.parseInt(box.value, 10);
  if (Number.isNaN(n)) {
    shown.textContent = box.defaultValue;
  } else {
    shown.textContent = String(Math.min(Math.max(n, 1), Number(box.max)));
  }
});
