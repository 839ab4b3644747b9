package reqdetect

// langDE is the cue table of German (rule 9; languages.go reads it).
var langDE = &langTable{
	code: "de", name: "German", presented: "anbei angehängt beigefügt beiliegend", attach: "anhang",
	delivery:  "anhäng* anzuhäng* häng hänge hängen beifüg* beizufüg* exportier* speicher* abspeicher* hochlad* hochzulad* herunterladbar download veröffentlich* lade…hoch füge…bei stelle…bereit ableg* leg…ab stell…bereit bereitstellen herunterladbar* lad…hoch",
	send:      "schick* sende senden teile teilen liefer*",
	output:    "erstell* schreib* generier* erzeug* verfass* mach mache produzier* stelle…zusammen",
	transform: "konvertier* umwandel* wandle übersetz*",
	input:     "lies lese lesen fasse zusammenfass* prüf* überprüf* analysier* vergleich* sieh schau nutze verwende benutze öffne bewerte führe…aus ausführen",
	reply:     "antworte antworten beantworte* erklär* sag", inline: "hier chat antwort",
	negators: "nicht kein keine keinen keiner keines nichts ohne", fileWords: "datei dateien",
	model:      "wie vorlage muster beispiel basierend anhand vorbild gleichen stil folgend",
	modelNouns: "vorlage muster beispiel", destPreps: "als in nach zu unter", namingPreps: "als",
	sourcePreps:  "aus von",
	productNouns: "export exporter script skript tool funktion befehl programm app dienst job button knopf schaltfläche option feature",
	featureVerbs: "implementier* hinzufüg* hinzuzufüg* füge unterstütz* baue",
	whWords:      "wer was wann warum welche welcher welches wo wie wieso",
	perfect:      "habe hast hat haben habt wurde wurden schon bereits",
	function:     "der das und ist mit für von dem des ein eine einen bitte sie ihn ihm als auf nicht dieses diese dieser zum zur ich du wir ihr es den im vom bei aus nach wird werden kann soll muss auch noch nur oder aber wenn dass",
	deliverables: "erwartete_ergebnisse ergebnisse ergebnis lieferumfang liefergegenstände ausgabedateien zu_liefern abgaben abgabe liefergegenstand",
	inputs:       "eingaben eingabe eingabedateien kontext hintergrund referenzen quellen unterlagen vorlagen anhänge ausgangslage eingabedaten ausgangsdaten quelldaten materialien",
	edit:         "anpass* korrektur* pass…an aktualisier* überarbeit* korrigier* ändere ändern bearbeite behebe beheben repariere fixe fixen ergänze ergänzen überschreib*",
	naming:       "nenne benenne* nennen", polite: "bitte", repo: "branch zweig test tests regressionstest unittest",
	bug: "fehler bug", nounMarks: "der dem des den zur zum", pointers: "sie ihn es diese dieses",
	other:  "weitere* andere* zusätzliche*",
	toward: "ans",
}
