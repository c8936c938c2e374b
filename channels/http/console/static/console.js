// The console's only script of its own (the page's CSP allows scripts from itself only):
// after a message is sent, empty the box and scroll to the reply as it streams in.
document.addEventListener("htmx:afterRequest", function (event) {
  var form = event.detail.elt;
  if (form && form.id === "send" && event.detail.successful) {
    form.reset();
  }
});
document.addEventListener("htmx:sseMessage", function (event) {
  var elt = event.detail.elt || event.target;
  if (elt && elt.scrollIntoView && elt.closest && elt.closest("#replies")) {
    elt.scrollIntoView({block: "nearest"});
  }
});
