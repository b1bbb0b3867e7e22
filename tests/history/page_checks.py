"""What the history page must show, read from headless Chromium (tests/support/browser.py)."""
from __future__ import annotations

from pathlib import Path

from tests.support.browser import run_script

# The page as the browser laid it out: each series card with its charts' points and regression
# markers, every overlap of two texts inside a chart or of two cards, and the filters at work.
GEOMETRY_JS = r"""
function box(e){var r=e.getBoundingClientRect();return {l:r.left,t:r.top,r:r.right,b:r.bottom,w:r.width,h:r.height};}
function hit(a,b){return a.l<b.r-0.5&&b.l<a.r-0.5&&a.t<b.b-0.5&&b.t<a.b-0.5;}
var out={series:[],overlaps:[],errors:[]};
var cards=Array.from(document.querySelectorAll('section.series'));
cards.forEach(function(c){
  var s={key:JSON.parse(c.getAttribute('data-key')),charts:{}};
  c.querySelectorAll('svg.chart').forEach(function(svg){
    var m=svg.getAttribute('data-metric');
    s.charts[m]={points:Array.from(svg.querySelectorAll('circle.point')).map(function(p){
                   return {run:p.getAttribute('data-run'),verdict:p.getAttribute('data-verdict'),
                           tip:p.querySelector('title').textContent,visible:box(p).w>0};}),
                 regressions:Array.from(svg.querySelectorAll('g.regression-marker')).map(function(g){
                   return g.getAttribute('data-run');}),
                 intervals:svg.querySelectorAll('g.interval').length};
    var texts=Array.from(svg.querySelectorAll('text')).filter(function(t){return t.textContent.trim();});
    for(var i=0;i<texts.length;i++)for(var j=i+1;j<texts.length;j++){
      if(hit(box(texts[i]),box(texts[j])))out.overlaps.push(m+': "'+texts[i].textContent+'" / "'+texts[j].textContent+'"');}
    var sb=box(svg);
    texts.forEach(function(t){var b=box(t);if(b.l<sb.l-1||b.r>sb.r+1||b.t<sb.t-1||b.b>sb.b+1)
      out.overlaps.push(m+': "'+t.textContent+'" outside its chart');});
  });
  var svgs=Array.from(c.querySelectorAll('svg.chart'));
  for(var i=0;i<svgs.length;i++)for(var j=i+1;j<svgs.length;j++)
    if(hit(box(svgs[i]),box(svgs[j])))out.overlaps.push('two charts overlap in '+c.id);
  var tb=c.querySelector('table');
  if(tb)svgs.forEach(function(v){if(hit(box(v),box(tb)))out.overlaps.push('chart over the runs table in '+c.id);});
  out.series.push(s);
});
for(var i=0;i<cards.length;i++)for(var j=i+1;j<cards.length;j++)
  if(hit(box(cards[i]),box(cards[j])))out.overlaps.push('cards '+cards[i].id+' / '+cards[j].id);
out.regression_items=Array.from(document.querySelectorAll('ul.regs li')).map(function(li){return li.getAttribute('data-run');});
out.latest_rows=document.querySelectorAll('#latest tbody tr').length;
// the filters: pick the first model that is not the last, count what stays shown
var sel=document.getElementById('f-model');
out.models=Array.from(sel.options).map(function(o){return o.value;}).filter(function(v){return v;});
sel.value=out.models[0];sel.dispatchEvent(new Event('change'));
out.shown_after_model=cards.filter(function(c){return c.style.display!=='none';}).length;
out.shown_text=document.getElementById('shown').textContent;
var eng=document.getElementById('f-engine');sel.value='';sel.dispatchEvent(new Event('change'));
out.engines=Array.from(eng.options).map(function(o){return o.value;}).filter(function(v){return v;});
eng.value=out.engines[0];eng.dispatchEvent(new Event('change'));
out.shown_after_engine=cards.filter(function(c){return c.style.display!=='none';}).length;
out.scripts_external=Array.from(document.querySelectorAll('script[src],link[href]')).length;
return out;
"""


def page_facts(index: Path, shot: Path | None = None) -> dict:
    return run_script(index, GEOMETRY_JS, shot)
