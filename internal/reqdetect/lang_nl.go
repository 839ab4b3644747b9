package reqdetect

// langNL is the cue table of Dutch (rule 9; languages.go reads it).
var langNL = &langTable{
	code: "nl", name: "Dutch", presented: "bijgevoegd", attach: "bijlage",
	delivery:  "bijvoegen bij_te_voegen exporteer* opslaan upload* lever opleveren oplever* downloadbaar voeg…bij sla…op hang…aan voeg…toe",
	send:      "stuur* deel delen",
	output:    "maak maken schrijf schrijven genereer genereren produceer creëer stel…op maak…aan",
	transform: "converteer* vertaal* zet…om",
	input:     "lees lezen vat samenvatten analyseer* vergelijk* bekijk* controleer* gebruik* beoordeel* vat…samen voer…uit uitvoeren draai",
	reply:     "antwoord beantwoord* vertel leg leg…uit", inline: "hier chat antwoord reactie",
	negators: "niet geen zonder nooit niets", fileWords: "bestand bestanden",
	model: "zoals sjabloon voorbeeld gebaseerd hetzelfde dezelfde stijl volgens", modelNouns: "sjabloon voorbeeld",
	destPreps: "naar", sourcePreps: "uit van",
	productNouns: "knop opdracht functie programma dienst optie functionaliteit",
	featureVerbs: "voeg implementeer* bouw", whWords: "wat wanneer waarom welke hoe waar",
	perfect:      "heb hebt heeft hebben reeds",
	function:     "het een en voor dit deze naar niet van op te ook maar dat je wij ik jij bij om aan",
	deliverables: "opleveringen oplevering uitvoerbestanden op_te_leveren opleveren deliverable",
	inputs:       "invoer invoerbestanden achtergrond referenties bronnen bijlagen situatie achtergrondinformatie invoergegevens",
	edit:         "pas…aan correctie* aanpassen werk…bij bijwerken wijzig* corrigeer* repareer* herstel*", naming: "noem* geef…naam",
	polite: "graag alsjeblieft alstublieft", repo: "branch tak test tests regressietest", bug: "fout", nounMarks: "van",
	pointers: "dit deze",
	other:    "andere extra verdere",
	toward:   "aan",
}
